package checks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/labctl/labctl/internal/labs"
)

// What counts as the operator's progress: a status changed, an object
// someone else created, wrote or deleted; never what labctl did itself.
func TestActivityCountsOnlyOthersWrites(t *testing.T) {
	dbs := schema.GroupVersionResource{Group: "database.example.com", Version: "v1", Resource: "databases"}
	sts := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	a := &activity{workload: map[schema.GroupVersionResource]bool{dbs: true}, seen: map[string]string{}, objects: map[string]bool{}, ours: map[types.UID]bool{}}
	at := func(s int) *metav1.Time { return &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC)} }
	obj := func(name, uid string, status map[string]any, fields ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetName(name)
		u.SetUID(types.UID(uid))
		if status != nil {
			u.Object["status"] = status
		}
		u.SetManagedFields(fields)
		return u
	}
	ours := func(s int) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: FieldManager, Time: at(s)}
	}
	operator := func(s int) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: "manager", Time: at(s)}
	}

	steps := []struct {
		what     string
		gvr      schema.GroupVersionResource
		typ      watch.EventType
		u        *unstructured.Unstructured
		progress bool
	}{
		{"labctl creates a Database", dbs, watch.Added, obj("db", "1", nil, ours(1)), false},
		{"the operator adds its finalizer", dbs, watch.Modified, obj("db", "1", nil, ours(1), operator(2)), true},
		{"the operator writes the status", dbs, watch.Modified, obj("db", "1", map[string]any{"phase": "Pending"}, ours(1), operator(2)), true},
		{"labctl patches the spec", dbs, watch.Modified, obj("db", "1", map[string]any{"phase": "Pending"}, ours(5), operator(2)), false},
		{"the operator creates a StatefulSet", sts, watch.Added, obj("db", "2", nil, operator(6)), true},
		{"labctl deletes it", sts, watch.Deleted, obj("db", "2", nil, operator(6)), false},
		{"the operator deletes the Database's other child", sts, watch.Deleted, obj("db-x", "3", nil, operator(6)), true},
	}
	a.deletedByUs("2")
	for _, st := range steps {
		before := len(a.changes)
		a.see(st.gvr, st.typ, st.u, true)
		assert.Equal(t, st.progress, len(a.changes) > before, st.what)
	}
	assert.Equal(t, 1, a.workloadSize(), "one Database: the workload")
	a.see(dbs, watch.Deleted, obj("db", "1", nil), true)
	assert.Equal(t, 0, a.workloadSize())
	assert.Equal(t, 5, a.changesSince(time.Time{}))
	assert.Zero(t, a.changesSince(time.Now().Add(time.Minute)))
}

// A run follows the lab's kinds, every kind its steps refer to and the
// cluster's work (pods, claims, jobs), never Events.
func TestFollowedKinds(t *testing.T) {
	l := &labs.Lab{Kinds: map[string]string{"database": "database.example.com/v1/Database"}}
	l.Scenarios = []labs.Scenario{{Steps: []labs.Step{
		{Expect: &labs.Expect{Ref: labs.Ref{Kind: "statefulset", Name: "x"}}},
		{Wait: &labs.Expect{Ref: labs.Ref{Kind: "event", Name: "x"}}},
		{Delete: &labs.Delete{Ref: labs.Ref{Kind: "secret", Name: "x"}}},
	}}}
	assert.Equal(t, []string{"database", "job", "persistentvolumeclaim", "pod", "secret", "statefulset"}, followedKinds(l))
}

// Messages name the operator's kinds apart from the cluster's work.
func TestActivityDescribe(t *testing.T) {
	a := &activity{names: []string{"databases", "statefulsets"}, work: []string{"jobs", "claims", "pods"}}
	assert.Equal(t, "the operator's databases, statefulsets and the namespace's jobs, claims, pods", a.describe())
	assert.Equal(t, "the namespace's pods", (&activity{work: []string{"pods"}}).describe())
	assert.Equal(t, "the operator's databases", (&activity{names: []string{"databases"}}).describe())
}
