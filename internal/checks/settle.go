package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/labctl/labctl/internal/kube"
)

// isTimeout tells a wait that ran out of time from other errors.
func isTimeout(err error) bool { return errors.Is(err, context.DeadlineExceeded) }

// settle waits until an object has not changed for quiet (at most
// timeout), watching it, and, where the audit log can be read, until
// nothing else about it has been written for as long (stillBusy): the
// operator has then finished reacting to it.
func (r *run) settle(ctx context.Context, gvr schema.GroupVersionResource, name string, quiet, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	changed := make(chan struct{}, 1)
	lw := kube.NameListWatch(r.dyn.Resource(gvr).Namespace(r.ns), name)
	go func() {
		_, _ = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
			if ev.Type != watch.Bookmark {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
			return false, nil
		})
	}()
	return quietLoop(ctx, changed, quiet, func(ctx context.Context) time.Duration { return r.stillBusy(ctx, name, quiet) })
}

// quietLoop is settle's clock: it ends nil once nothing arrived on changed
// for quiet and busy (how much longer what a watch cannot see keeps the
// object busy) says nothing more, or with settleEnded when ctx ends first.
func quietLoop(ctx context.Context, changed <-chan struct{}, quiet time.Duration, busy func(context.Context) time.Duration) error {
	start := time.Now()
	changes := 0
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			more := busy(ctx)
			// Reading the audit log may outlast the deadline; quiet then is
			// not proven, however little the read returned.
			if ctx.Err() != nil {
				return settleEnded(ctx, quiet, start, changes)
			}
			if more > 0 {
				changes++
				timer.Reset(more)
				continue
			}
			return nil
		case <-changed:
			changes++
			if !timer.Stop() {
				<-timer.C
			}
			timer.Reset(quiet)
		case <-ctx.Done():
			return settleEnded(ctx, quiet, start, changes)
		}
	}
}

// neverQuiet is a settle that ran out of time: the object kept changing.
type neverQuiet struct {
	quiet, waited time.Duration
	changes       int
}

func (e *neverQuiet) Error() string {
	return fmt.Sprintf("never unchanged for %s within %s (%d changes): the steps after it ran while the operator was still reacting", roundDur(e.quiet), roundDur(e.waited), e.changes)
}

// settleEnded is why a settle stopped before quiet: its deadline (the
// object never went quiet) or the caller's cancellation.
func settleEnded(ctx context.Context, quiet time.Duration, start time.Time, changes int) error {
	if ctx.Err() == context.DeadlineExceeded {
		return &neverQuiet{quiet: quiet, waited: time.Since(start), changes: changes}
	}
	return ctx.Err()
}

// stillBusy is how much longer a settle must wait for what a watch of the
// object cannot see: the operator's requests that change nothing visible
// (an update with nothing new, a write refused with a conflict that it will
// retry) and the writes to the object's children by anyone but labctl (a
// StatefulSet's status as its pods start). Either may still wake the
// operator after the object itself fell quiet, and a reconcile woken then
// would answer the next provoked event for it. It reads the audit log; with
// none it cannot tell and returns 0.
func (r *run) stillBusy(ctx context.Context, name string, quiet time.Duration) time.Duration {
	c := &Context{run: r, Timeout: quiet}
	if c.Env().AuditLog == nil {
		return 0
	}
	evs, err := c.syncAudit(ctx)
	if err != nil {
		return 0
	}
	self := auditSyncUser(evs)
	var last time.Time
	for i := range evs {
		ev := &evs[i]
		if !isWrite(ev.Verb) || ev.ObjectRef == nil || ev.ObjectRef.Namespace != r.ns || ev.By(self) {
			continue
		}
		if relatedName(ev.ObjectRef.Name, name) && ev.RequestReceivedTimestamp.After(last) {
			last = ev.RequestReceivedTimestamp
		}
	}
	if last.IsZero() {
		return 0
	}
	return quiet - time.Since(last)
}

// relatedName reports whether an object's name says it belongs to the
// named one: itself, its children (test-db-credentials, test-db-0) and its
// Events (test-db.17f…). Only a wait uses it, so a stranger with a like
// name costs a little time, never a verdict.
func relatedName(object, name string) bool {
	return object == name || strings.HasPrefix(object, name+"-") || strings.HasPrefix(object, name+".")
}
