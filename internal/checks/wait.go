package checks

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
)

// waitFor watches one object of the run's namespace until cond holds and
// returns the last state observed (nil: absent). Like kube.WaitFor, it
// lists once and then follows a watch from that list's resourceVersion, but
// without an informer, whose cache-sync polling adds 100ms to every wait;
// verify waits a few dozen times per run. A wait that runs out of time
// returns a *waitTimeout (errors.Is context.DeadlineExceeded).
func (r *run) waitFor(ctx context.Context, gvr schema.GroupVersionResource, name string, timeout time.Duration, cond kube.Condition) (*unstructured.Unstructured, error) {
	return r.waitUntil(ctx, gvr, name, timeout, nil, nil, 0, cond)
}

// waitFollowing is waitFor that keeps waiting past timeout while the
// operator is making progress (see activity.go): until nothing it works
// on has changed for the lab's idle time, and at most until the cap, its
// timeout plus each per object of the lab's kinds in the namespace (those
// a scenario beside this one creates while it waits count too: they share
// the operator's one worker with the object waited for). A ceiling > 0
// bounds the cap. spec overrides the lab's idle and each; without a
// followed namespace the wait is a plain one.
func (r *run) waitFollowing(ctx context.Context, gvr schema.GroupVersionResource, name string, timeout time.Duration, spec *labs.Progress, ceiling time.Duration, cond kube.Condition) (*unstructured.Unstructured, error) {
	return r.waitUntil(ctx, gvr, name, timeout, r.activity, spec, ceiling, cond)
}

// waitUntil is waitFor following prog (nil: a plain wait).
func (r *run) waitUntil(ctx context.Context, gvr schema.GroupVersionResource, name string, timeout time.Duration, prog *activity, spec *labs.Progress, ceiling time.Duration, cond kube.Condition) (*unstructured.Unstructured, error) {
	start := time.Now()
	limit := func() time.Time { return start.Add(timeout) }
	var idle time.Duration
	if prog != nil {
		p := r.progressSpec(spec)
		idle = r.stretched(p.Idle.For(r.profile))
		each := r.stretched(p.Each.For(r.profile))
		limit = func() time.Time {
			return start.Add(progressCap(timeout, prog.workloadSize(), each, ceiling))
		}
	}
	// A plain wait ends at its timeout; one that follows progress ends at
	// its deadline, which moves (the timer below), and its list at the
	// cap as it stands.
	var cancel context.CancelFunc
	if prog == nil {
		ctx, cancel = context.WithDeadline(ctx, limit())
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	deadline := func() time.Time {
		if prog == nil {
			return start.Add(timeout)
		}
		return progressDeadline(start, timeout, prog.lastChange(), idle, limit())
	}
	timedOut := func(err error) error {
		if ctx.Err() != nil || !time.Now().Before(deadline()) {
			return newWaitTimeout(start, timeout, prog, idle, limit())
		}
		return err
	}
	res := r.dyn.Resource(gvr).Namespace(r.ns)
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lctx, lcancel := context.WithDeadline(ctx, limit())
	list, err := res.List(lctx, metav1.ListOptions{FieldSelector: selector})
	lcancel()
	if err != nil {
		return nil, timedOut(err)
	}
	var last *unstructured.Unstructured
	if len(list.Items) > 0 {
		last = &list.Items[0]
	}
	if ok, err := cond(last); err != nil || ok {
		return last, err
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), kube.NameListWatch(res, name))
	if err != nil {
		return last, err
	}
	defer func() {
		rw.Stop()
		<-rw.Done()
	}()
	timer := time.NewTimer(time.Until(deadline()))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			if d := time.Until(deadline()); d > 0 {
				timer.Reset(d) // the operator made progress meanwhile
				continue
			}
			return last, timedOut(context.DeadlineExceeded)
		case <-ctx.Done():
			return last, timedOut(ctx.Err())
		case ev, ok := <-rw.ResultChan():
			if !ok {
				return last, timedOut(fmt.Errorf("the watch on %s %s ended", gvr.Resource, name))
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					last = u
				}
			case watch.Deleted:
				last = nil
			case watch.Error:
				return last, apierrors.FromObject(ev.Object)
			default:
				continue
			}
			if ok, err := cond(last); err != nil || ok {
				return last, err
			}
		}
	}
}

// progressSpec is the idle and each a wait follows progress with: its
// own, else the lab's, else labctl's (defaultProgress).
func (r *run) progressSpec(own *labs.Progress) labs.Progress {
	switch {
	case own != nil:
		return *own
	case r.lab.Defaults.Progress != nil:
		return *r.lab.Defaults.Progress
	}
	return defaultProgress
}

// progressCap is the most a wait that follows progress may take: its
// timeout plus each per object of the lab's kinds in the namespace (the
// object waited for is work too, in a lab of no kinds of its own); a
// ceiling > 0 bounds it, but never below the timeout.
func progressCap(timeout time.Duration, workload int, each, ceiling time.Duration) time.Duration {
	most := timeout + time.Duration(max(1, workload))*each
	if ceiling > 0 {
		most = min(most, max(timeout, ceiling))
	}
	return most
}

// progressDeadline is when a wait that started at start ends: at its
// timeout, or later while the operator's last progress is recent (within
// idle), but never past limit.
func progressDeadline(start time.Time, timeout time.Duration, lastChange time.Time, idle time.Duration, limit time.Time) time.Time {
	end := start.Add(timeout)
	if e := lastChange.Add(idle); e.After(end) {
		end = e
	}
	if end.After(limit) {
		end = limit
	}
	return end
}

// waitTimeout is a wait that ran out of time, with what people need to
// judge it: how long it waited, and whether and when the operator last
// made progress.
type waitTimeout struct {
	waited    time.Duration
	timeout   time.Duration
	following string // what was followed ("" none): "the operator's databases and the namespace's pods, claims, Jobs"
	changes   int
	quietFor  time.Duration // since the last progress (changes > 0)
	capped    bool          // stopped by the cap while still progressing
}

func newWaitTimeout(start time.Time, timeout time.Duration, prog *activity, idle time.Duration, limit time.Time) *waitTimeout {
	now := time.Now()
	t := &waitTimeout{waited: now.Sub(start), timeout: timeout}
	if prog != nil {
		t.following = prog.describe()
		t.changes = prog.changesSince(start)
		if lc := prog.lastChange(); !lc.IsZero() {
			t.quietFor = now.Sub(lc)
			t.capped = !now.Before(limit) && t.quietFor < idle
		}
	}
	return t
}

func (t *waitTimeout) Error() string {
	msg := "timed out after " + roundDur(t.waited)
	switch {
	case t.following == "":
	case t.capped:
		msg += fmt.Sprintf(" (the most this step may take: %s while %s kept changing, %d times)", roundDur(t.waited), t.following, t.changes)
	case t.changes == 0:
		msg += fmt.Sprintf(" (none of %s changed meanwhile)", t.following)
	default:
		changes := fmt.Sprintf("%d changes", t.changes)
		if t.changes == 1 {
			changes = "1 change"
		}
		msg += fmt.Sprintf(" (%s to %s meanwhile, the last %s before the end)", changes, t.following, roundDur(t.quietFor))
	}
	return msg
}

func (t *waitTimeout) Unwrap() error { return context.DeadlineExceeded }

// WaitFollowing is waitFollowing for Go checks, with the lab's progress
// rules: for what the operator must do (a window of its own, not one a
// check sets for a race it provokes).
func (c *Context) WaitFollowing(ctx context.Context, gvr schema.GroupVersionResource, name string, timeout time.Duration, cond kube.Condition) (*unstructured.Unstructured, error) {
	return c.run.waitFollowing(ctx, gvr, name, timeout, nil, 0, cond)
}

// WaitFor is waitFor for Go checks.
func (c *Context) WaitFor(ctx context.Context, gvr schema.GroupVersionResource, name string, timeout time.Duration, cond kube.Condition) (*unstructured.Unstructured, error) {
	return c.run.waitFor(ctx, gvr, name, timeout, cond)
}
