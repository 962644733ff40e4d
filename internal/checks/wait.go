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
)

// waitFor watches one object of the run's namespace until cond holds and
// returns the last state observed (nil: absent). Like kube.WaitFor, it
// lists once and then follows a watch from that list's resourceVersion, but
// without an informer, whose cache-sync polling adds 100ms to every wait;
// verify waits a few dozen times per run.
func (r *run) waitFor(ctx context.Context, gvr schema.GroupVersionResource, name string, timeout time.Duration, cond kube.Condition) (*unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	timedOut := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("timed out after %s: %w", timeout, context.DeadlineExceeded)
		}
		return err
	}
	res := r.dyn.Resource(gvr).Namespace(r.ns)
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	list, err := res.List(ctx, metav1.ListOptions{FieldSelector: selector})
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
	for {
		select {
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

// WaitFor is waitFor for Go checks.
func (c *Context) WaitFor(ctx context.Context, gvr schema.GroupVersionResource, name string, timeout time.Duration, cond kube.Condition) (*unstructured.Unstructured, error) {
	return c.run.waitFor(ctx, gvr, name, timeout, cond)
}
