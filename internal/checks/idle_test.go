package checks

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIdleParamsDefaults(t *testing.T) {
	p := &idleParams{}
	require.NoError(t, p.Validate())
	require.Equal(t, defaultIdleMaxCPU, p.MaxCPU)
	require.Equal(t, defaultIdleMaxWrites, p.MaxWritesPerSecond)
	require.Error(t, (&idleParams{MaxCPU: -1}).Validate())
}

// The evidence of a hot loop names what it keeps writing, most first.
func TestTopWrites(t *testing.T) {
	ev := func(verb, resource, name, sub string) *AuditEvent {
		e := &AuditEvent{Verb: verb}
		e.ObjectRef = &AuditObjectRef{Resource: resource, Name: name, Subresource: sub}
		return e
	}
	counts := map[string]int{}
	for range 40 {
		counts[describeWrite(ev("update", "databases", "my-db", ""))]++
	}
	for range 40 {
		counts[describeWrite(ev("patch", "databases", "my-db", "status"))]++
	}
	counts[describeWrite(ev("create", "events", "", ""))]++
	counts[describeWrite(ev("delete", "pods", "p-0", ""))]++
	require.Equal(t, "PATCH databases/my-db/status ×40, PUT databases/my-db ×40, DELETE pods/p-0 ×1", topWrites(counts, 3))
	require.True(t, isWrite("patch") && isWrite("deletecollection") && !isWrite("get") && !isWrite("watch"))
}
