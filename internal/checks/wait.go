package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
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
	return r.waitFollowing(ctx, gvr, name, timeout, nil, cond)
}

// waitFollowing is waitFor that, given a progress spec, keeps waiting past
// timeout while the operator is making progress (see labs.Progress).
func (r *run) waitFollowing(ctx context.Context, gvr schema.GroupVersionResource, name string, timeout time.Duration, spec *labs.Progress, cond kube.Condition) (*unstructured.Unstructured, error) {
	start := time.Now()
	limit := func() time.Time { return start.Add(timeout) }
	var prog *progressWatch
	var idle time.Duration
	if spec != nil {
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		if p, each, err := r.watchProgress(pctx, spec, timeout); err == nil {
			prog, idle = p, r.stretched(spec.Idle.For(r.profile))
			// The cap grows with the objects the operator works through,
			// those a scenario beside this one creates while it waits too
			// (ten Databases created after this wait began share the
			// operator's one worker with the object it waits for).
			limit = func() time.Time { return start.Add(timeout + time.Duration(p.objects())*each) }
		}
		// Without a progress watch the wait is a plain one: its timeout.
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
	following string // the kind whose progress was followed ("" none)
	changes   int
	quietFor  time.Duration // since the last progress (changes > 0)
	capped    bool          // stopped by the cap while still progressing
}

func newWaitTimeout(start time.Time, timeout time.Duration, prog *progressWatch, idle time.Duration, limit time.Time) *waitTimeout {
	now := time.Now()
	t := &waitTimeout{waited: now.Sub(start), timeout: timeout}
	if prog != nil {
		t.following = prog.kind
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
		msg += fmt.Sprintf(" (the most this step may take: %s while the operator kept changing %s statuses, %d times)", roundDur(t.waited), t.following, t.changes)
	case t.changes == 0:
		msg += fmt.Sprintf(" (no %s status changed meanwhile)", t.following)
	default:
		msg += fmt.Sprintf(" (%d %s status changes meanwhile, the last %s before the end)", t.changes, t.following, roundDur(t.quietFor))
	}
	return msg
}

func (t *waitTimeout) Unwrap() error { return context.DeadlineExceeded }

// progressWatch follows the status of every object of one kind in the run's
// namespace and remembers when one last changed.
type progressWatch struct {
	kind string

	mu      sync.Mutex
	status  map[string]string // name -> status as JSON
	changes []time.Time
}

// watchProgress starts a progressWatch (it runs until ctx ends) and
// returns it with the stretched cap per object.
func (r *run) watchProgress(ctx context.Context, spec *labs.Progress, timeout time.Duration) (*progressWatch, time.Duration, error) {
	_, gvr, _, err := r.gvr(spec.Kind)
	if err != nil {
		return nil, 0, err
	}
	p := &progressWatch{kind: spec.Kind, status: map[string]string{}}
	res := r.dyn.Resource(gvr).Namespace(r.ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, o)
		},
	}
	synced := make(chan struct{})
	var once sync.Once
	go func() {
		_, _ = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, func(store cache.Store) (bool, error) {
			for _, item := range store.List() {
				p.see(item.(*unstructured.Unstructured), false)
			}
			once.Do(func() { close(synced) })
			return false, nil
		}, func(ev watch.Event) (bool, error) {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Bookmark && ev.Type != watch.Error {
				p.see(u, true)
			}
			return false, nil
		})
		once.Do(func() { close(synced) })
	}()
	select {
	case <-synced:
	case <-time.After(timeout):
		return nil, 0, fmt.Errorf("the watch on %s did not sync within %s", gvr.Resource, roundDur(timeout))
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return p, r.stretched(spec.Each.For(r.profile)), nil
}

// see records an object's status; a status that differs from the one
// seen before (or a new object, after the initial list) is progress.
func (p *progressWatch) see(u *unstructured.Unstructured, event bool) {
	st, _ := json.Marshal(u.Object["status"])
	p.mu.Lock()
	defer p.mu.Unlock()
	old, known := p.status[u.GetName()]
	p.status[u.GetName()] = string(st)
	if event && (!known || old != string(st)) {
		p.changes = append(p.changes, time.Now())
	}
}

func (p *progressWatch) objects() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.status)
}

func (p *progressWatch) lastChange() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.changes) == 0 {
		return time.Time{}
	}
	return p.changes[len(p.changes)-1]
}

func (p *progressWatch) changesSince(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.changes {
		if !c.Before(t) {
			n++
		}
	}
	return n
}

// WaitFor is waitFor for Go checks.
func (c *Context) WaitFor(ctx context.Context, gvr schema.GroupVersionResource, name string, timeout time.Duration, cond kube.Condition) (*unstructured.Unstructured, error) {
	return c.run.waitFor(ctx, gvr, name, timeout, cond)
}
