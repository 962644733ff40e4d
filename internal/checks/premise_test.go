package checks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/labctl/labctl/internal/labs"
)

// A status labctl set holds while the patched fields keep what the API
// server stored (pruned fields stay absent, numbers compare as JSON does,
// fields labctl did not patch may change); a later patch of the same path
// replaces the earlier one.
func TestPremiseChanged(t *testing.T) {
	s := &scenario{premises: map[string]*premise{}}
	backups := schema.GroupVersionResource{Group: "database.example.com", Version: "v1", Resource: "backups"}
	ref := labs.Ref{Kind: "backup", Name: "phase-only-backup"}
	obj := func(status map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": status}}
	}
	// The server pruned "unknown" (not in the schema).
	s.rememberPremise(ref, backups, map[string]any{"status": map[string]any{"phase": "Completed", "conditions": nil, "unknown": 1, "size": 2}},
		obj(map[string]any{"phase": "Completed", "size": int64(2)}))
	p := s.premises[ref.String()]
	require.NotNil(t, p)
	assert.Empty(t, p.changed(obj(map[string]any{"phase": "Completed", "size": float64(2), "backupLocation": "/backups/x"})))

	got := p.changed(obj(map[string]any{"phase": "Pending", "size": int64(2), "conditions": []any{
		map[string]any{"type": "BackupReady", "status": "False", "reason": "DatabaseNotFound"}}}))
	assert.Equal(t, []string{
		"status.conditions BackupReady=False/DatabaseNotFound, labctl set none",
		`status.phase "Pending", labctl set "Completed"`,
	}, got)

	cond := []any{map[string]any{"type": "BackupReady", "status": "True", "reason": "BackupCompleted"}}
	s.rememberPremise(ref, backups, map[string]any{"status": map[string]any{"conditions": cond}},
		obj(map[string]any{"phase": "Completed", "size": int64(2), "conditions": cond}))
	assert.Empty(t, p.changed(obj(map[string]any{"phase": "Completed", "size": int64(2), "conditions": cond})))
	assert.Equal(t, []string{"status.conditions none, labctl set BackupReady=True/BackupCompleted"},
		p.changed(obj(map[string]any{"phase": "Completed", "size": int64(2)})))

	s.forgetPremises(schema.GroupVersionResource{Resource: "databases"}, "")
	assert.Len(t, s.premises, 1)
	s.forgetPremises(backups, "")
	assert.Empty(t, s.premises)
}
