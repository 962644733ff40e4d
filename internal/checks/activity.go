package checks

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/labctl/labctl/internal/labs"
)

// How long a wait takes is the operator's throughput on this machine now,
// not the API's latency: one worker takes the objects of every scenario in
// turn, and on a busy machine each of its steps is slower. So every wait
// that expects the operator to do something follows what it does: a run
// watches, in its namespace, the lab's own kinds, every kind a step
// refers to and the cluster's work on them (pods, claims, Jobs), and a wait
// goes on past its timeout while something there keeps changing (see progressDeadline). Changes labctl makes itself are
// not progress: an object it created, a spec it patched, an object it
// deleted.

// Engine defaults for labs that do not say (labs.Defaults.Progress).
var defaultProgress = labs.Progress{
	Idle: labs.Timeout{Local: 5 * time.Second, Kind: 30 * time.Second},
	Each: labs.Timeout{Local: 2 * time.Second, Kind: 20 * time.Second},
}

// recreateCeiling bounds a wait for a deleted object to come back, however
// busy the operator is: an operator that does not watch the object brings
// it back at its next periodic requeue, and a minute is the shortest such
// period the course's mistakes use. A watching operator, even with a
// queue of other objects before it, is much faster. A step whose own
// timeout (as stretched) is longer keeps it: the ceiling never shortens
// a wait below its timeout.
const recreateCeiling = 45 * time.Second

// notFollowed are kinds whose changes say nothing about the operator's
// progress (Events are written by everyone, all the time).
var notFollowed = map[string]bool{"event": true, "events": true}

// clusterWork are the kinds through which the cluster carries out what
// an operator asked for: a StatefulSet's pods and claims, a Job's pods. An
// operator waiting for replicas to become ready changes nothing itself
// while the scheduler, the volume provisioner and the kubelet (kwok) work
// through them, one pod after another, on a busy machine for seconds: that
// is progress toward the goal as much as the operator's own writes.
var clusterWork = []string{"pod", "persistentvolumeclaim", "job"}

// workNames name clusterWork's kinds in messages.
var workNames = map[string]string{"pod": "pods", "persistentvolumeclaim": "claims", "job": "Jobs"}

// activity records the changes in the run's namespace to the kinds it
// follows; it runs from prepareNamespace to the end of the scenarios.
type activity struct {
	// workload are the lab's own kinds: how many objects of them there
	// are is what one worker has to take in turn.
	workload map[schema.GroupVersionResource]bool
	names    []string // the followed resources of the lab and its steps, for messages
	work     []string // the followed resources of clusterWork, for messages

	mu      sync.Mutex
	seen    map[string]string // resource/name -> status as JSON
	objects map[string]bool   // resource/name of the workload's objects
	changes []time.Time
	// ours are the UIDs of the objects labctl deleted: their deletion is
	// not the operator's doing.
	ours map[types.UID]bool
}

// followedKinds are the lab's kinds, every kind a step refers to, and the
// cluster's work (clusterWork), by the names refs use.
func followedKinds(l *labs.Lab) []string {
	set := map[string]bool{}
	for _, k := range clusterWork {
		set[k] = true
	}
	for k := range l.Kinds {
		set[k] = true
	}
	add := func(kind string) {
		if kind != "" && !notFollowed[kind] {
			set[kind] = true
		}
	}
	if p := l.Defaults.Progress; p != nil {
		add(p.Kind)
	}
	for _, sc := range l.Scenarios {
		for _, st := range sc.Steps {
			for _, e := range []*labs.Expect{st.Expect, st.Wait} {
				if e != nil {
					add(e.Ref.Kind)
					if e.Progress != nil {
						add(e.Progress.Kind)
					}
				}
			}
			if st.Delete != nil {
				add(st.Delete.Ref.Kind)
				add(st.Delete.All)
			}
			if st.Patch != nil {
				add(st.Patch.Ref.Kind)
			}
		}
	}
	kinds := make([]string, 0, len(set))
	for k := range set {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// startActivity starts following the run's namespace; it stops when ctx
// ends. Kinds the cluster does not serve (a CRD a later lab installs) are
// left out; when none can be followed, waits are plain ones.
func (r *run) startActivity(ctx context.Context) {
	a := &activity{workload: map[schema.GroupVersionResource]bool{}, seen: map[string]string{}, objects: map[string]bool{}, ours: map[types.UID]bool{}}
	var gvrs []schema.GroupVersionResource
	for _, kind := range followedKinds(r.lab) {
		_, gvr, namespaced, err := r.gvr(kind)
		if err != nil || !namespaced || slices.Contains(gvrs, gvr) {
			continue
		}
		gvrs = append(gvrs, gvr)
		if _, own := r.lab.Kinds[kind]; own {
			a.workload[gvr] = true
		}
		if slices.Contains(clusterWork, kind) {
			a.work = append(a.work, workNames[kind])
		} else {
			a.names = append(a.names, gvr.Resource)
		}
	}
	if len(gvrs) == 0 {
		return
	}
	syncBy := time.After(r.stretched(10 * time.Second))
	for _, gvr := range gvrs {
		synced := make(chan struct{})
		go a.follow(ctx, r, gvr, synced)
		select {
		case <-synced:
		case <-syncBy:
			return // a cluster this slow gets plain waits
		case <-ctx.Done():
			return
		}
	}
	r.activity = a
}

// follow lists and watches one resource until ctx ends, closing synced
// once its list is recorded.
func (a *activity) follow(ctx context.Context, r *run, gvr schema.GroupVersionResource, synced chan struct{}) {
	res := r.dyn.Resource(gvr).Namespace(r.ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, o)
		},
	}
	var once sync.Once
	_, _ = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, func(store cache.Store) (bool, error) {
		for _, item := range store.List() {
			a.see(gvr, watch.Added, item.(*unstructured.Unstructured), false)
		}
		once.Do(func() { close(synced) })
		return false, nil
	}, func(ev watch.Event) (bool, error) {
		if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Bookmark && ev.Type != watch.Error {
			a.see(gvr, ev.Type, u, true)
		}
		return false, nil
	})
	once.Do(func() { close(synced) })
}

// see records one object as listed (event false) or as a watch event
// reported it, and whether that was progress.
func (a *activity) see(gvr schema.GroupVersionResource, typ watch.EventType, u *unstructured.Unstructured, event bool) {
	key := gvr.Resource + "/" + u.GetName()
	st, _ := json.Marshal(u.Object["status"])
	a.mu.Lock()
	defer a.mu.Unlock()
	old, known := a.seen[key]
	progress := false
	switch typ {
	case watch.Deleted:
		delete(a.seen, key)
		delete(a.objects, key)
		progress = !a.ours[u.GetUID()]
	default:
		a.seen[key] = string(st)
		if a.workload[gvr] {
			a.objects[key] = true
		}
		switch {
		case known && old != string(st):
			progress = true // status is written by controllers
		case !known:
			progress = !onlyOurs(u.GetManagedFields())
		default:
			progress = !lastWriteOurs(u.GetManagedFields())
		}
	}
	if event && progress {
		a.changes = append(a.changes, time.Now())
	}
}

// deletedByUs marks an object labctl is about to delete.
func (a *activity) deletedByUs(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ours[uid] = true
}

// onlyOurs reports whether labctl is the only writer of an object (it
// created it and nobody else has touched it).
func onlyOurs(fields []metav1.ManagedFieldsEntry) bool {
	for _, f := range fields {
		if f.Manager != FieldManager {
			return false
		}
	}
	return len(fields) > 0
}

// lastWriteOurs reports whether the newest write recorded in an object's
// managed fields is labctl's alone (times are to the second: a tie with
// another writer is theirs too).
func lastWriteOurs(fields []metav1.ManagedFieldsEntry) bool {
	var newest time.Time
	for _, f := range fields {
		if f.Time != nil && f.Time.After(newest) {
			newest = f.Time.Time
		}
	}
	ours := false
	for _, f := range fields {
		if f.Time == nil || !f.Time.Time.Equal(newest) {
			continue
		}
		if f.Manager != FieldManager {
			return false
		}
		ours = true
	}
	return ours
}

// workloadSize is how many objects of the lab's own kinds there are.
func (a *activity) workloadSize() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.objects)
}

func (a *activity) lastChange() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.changes) == 0 {
		return time.Time{}
	}
	return a.changes[len(a.changes)-1]
}

func (a *activity) changesSince(t time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, _ := slices.BinarySearchFunc(a.changes, t, func(c, t time.Time) int { return c.Compare(t) })
	return len(a.changes) - i
}

// describe names what is followed, for messages: "the operator's
// databases, statefulsets and the namespace's pods, claims, Jobs".
func (a *activity) describe() string {
	var parts []string
	if len(a.names) > 0 {
		parts = append(parts, "the operator's "+strings.Join(a.names, ", "))
	}
	if len(a.work) > 0 {
		parts = append(parts, "the namespace's "+strings.Join(a.work, ", "))
	}
	return strings.Join(parts, " and ")
}

// deletingOurselves tells the followed namespace that labctl deletes the
// object with this UID.
func (r *run) deletingOurselves(uid types.UID) {
	if r.activity != nil {
		r.activity.deletedByUs(uid)
	}
}
