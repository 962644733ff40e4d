package checks

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/labctl/labctl/internal/labs"
)

func update(code int, image string) AuditEvent {
	ev := AuditEvent{Verb: "update", RequestObject: []byte(fmt.Sprintf(
		`{"apiVersion":"apps/v1","kind":"StatefulSet","spec":{"template":{"spec":{"containers":[{"name":"postgres","image":%q}]}}}}`, image))}
	ev.ResponseStatus = &struct {
		Code    int    `json:"code"`
		Message string `json:"message,omitempty"`
	}{Code: code}
	return ev
}

// A retry that re-sends the re-read object loses the change, whether it
// succeeds at once, conflicts again first, or conflicts until its attempts
// run out (its own body carries the old image); a retry that re-applies
// the change, or a newer one, keeps it.
func TestLostChanges(t *testing.T) {
	images := []string{"postgres:15", "postgres:16", "postgres:17"}
	cases := []struct {
		name string
		ops  []AuditEvent
		lost int
	}{
		{"retry carries the change", []AuditEvent{update(409, "postgres:15"), update(200, "postgres:15")}, 0},
		{"retry carries a newer one", []AuditEvent{update(409, "postgres:15"), update(200, "postgres:16")}, 0},
		{"retry re-sends the old image", []AuditEvent{update(409, "postgres:15"), update(200, "postgres:14")}, 1},
		{"the lost retry conflicts first", []AuditEvent{update(409, "postgres:15"), update(409, "postgres:14"), update(409, "postgres:14"), update(200, "postgres:14")}, 1},
		{"the lost retries run out and a fresh reconcile lands the change", []AuditEvent{update(409, "postgres:16"), update(409, "postgres:14"), update(409, "postgres:14"), update(200, "postgres:16")}, 1},
		{"the retries run out carrying the change", []AuditEvent{update(409, "postgres:16"), update(409, "postgres:16"), update(409, "postgres:16"), update(200, "postgres:16"), update(409, "postgres:17"), update(200, "postgres:17")}, 0},
		{"a fresh reconcile carries a newer image", []AuditEvent{update(409, "postgres:16"), update(409, "postgres:16"), update(409, "postgres:17"), update(200, "postgres:17")}, 0},
		{"no conflict", []AuditEvent{update(200, "postgres:14"), update(200, "postgres:15")}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Len(t, lostChanges(c.ops, "postgres", images), c.lost)
		})
	}
}

func TestConflictParamsNeedDistinctImages(t *testing.T) {
	p := conflictParams{Database: labs.Ref{Kind: "database", Name: "d"}, StatefulSet: labs.Ref{Kind: "statefulset", Name: "d"}, Container: "postgres",
		Images: []string{"postgres:15", "postgres:16"}, Spares: []string{"postgres:16.1"}}
	assert.NoError(t, p.Validate())
	p.Spares = append(p.Spares, "postgres:15")
	assert.ErrorContains(t, p.Validate(), `"postgres:15" is listed twice`)
}
