package checks

import (
	"context"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
)

// recorder keeps every state an object passes through, in order.
type recorder struct {
	mu     sync.Mutex
	states []Observed
	done   chan struct{}
	// changed is closed (and replaced) whenever a state is added.
	changed chan struct{}
}

// Observed is one state of a recorded object (nil Object: deleted or not
// yet there).
type Observed struct {
	At     time.Time
	Object *unstructured.Unstructured
}

// RV is the object's resourceVersion as a number. On etcd-backed API
// servers it is the etcd revision of the write, ordered across all objects
// of the cluster; 0 if unknown.
func (o Observed) RV() int64 {
	if o.Object == nil {
		return 0
	}
	n, _ := strconv.ParseInt(o.Object.GetResourceVersion(), 10, 64)
	return n
}

func (s *scenario) record(ctx context.Context, ref labs.Ref) (*recorder, error) {
	_, gvr, _, err := s.r.gvr(ref.Kind)
	if err != nil {
		return nil, err
	}
	res := s.r.dyn.Resource(gvr).Namespace(s.r.ns)
	rec := &recorder{done: make(chan struct{}), changed: make(chan struct{})}
	lw := kube.NameListWatch(res, ref.Name)
	synced := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(rec.done)
		_, _ = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, func(store cache.Store) (bool, error) {
			for _, item := range store.List() {
				rec.add(item.(*unstructured.Unstructured))
			}
			once.Do(func() { close(synced) })
			return false, nil
		}, func(ev watch.Event) (bool, error) {
			u, _ := ev.Object.(*unstructured.Unstructured)
			if ev.Type == watch.Deleted {
				u = nil
			}
			if ev.Type != watch.Bookmark && ev.Type != watch.Error {
				rec.add(u)
			}
			return false, nil
		})
		once.Do(func() { close(synced) })
	}()
	select {
	case <-synced:
		return rec, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (rec *recorder) add(u *unstructured.Unstructured) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if u != nil {
		u = u.DeepCopy()
	}
	rec.states = append(rec.states, Observed{At: time.Now(), Object: u})
	close(rec.changed)
	rec.changed = make(chan struct{})
}

// waitRV waits until the recorder has seen resourceVersion rv (or a later
// one): a check that reads the history right after another step saw the
// object must not race the recorder's own watch. It reports whether it did.
func (rec *recorder) waitRV(ctx context.Context, rv int64, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		rec.mu.Lock()
		for _, o := range rec.states {
			if o.RV() >= rv {
				rec.mu.Unlock()
				return true
			}
		}
		ch := rec.changed
		rec.mu.Unlock()
		select {
		case <-ch:
		case <-rec.done:
			return false
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		}
	}
}

// States returns what was observed so far.
func (rec *recorder) States() []Observed {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]Observed(nil), rec.states...)
}
