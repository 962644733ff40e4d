package checks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// readyAt is a recorded Database whose Ready condition has status since
// lastTransitionTime at.
func readyAt(status, at string) Observed {
	return Observed{Object: &unstructured.Unstructured{Object: map[string]any{
		"kind": "Database", "metadata": map[string]any{"name": "test-db"},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": status, "reason": "R", "lastTransitionTime": at},
		}},
	}}}
}

func TestMatchTransitionTimes(t *testing.T) {
	ref := labs.Ref{Kind: "database", Name: "test-db"}
	ready := []string{"Ready"}

	got := matchTransitionTimes(ref, []Observed{
		readyAt("False", "2026-12-02T10:00:00Z"),
		readyAt("False", "2026-12-02T10:00:00Z"), // a message changed, the status did not
		readyAt("True", "2026-12-02T10:00:03Z"),
		readyAt("False", "2026-12-02T10:00:03Z"), // a transition within the same second
		readyAt("True", "2026-12-02T10:00:05Z"),
	}, ready)
	assert.Equal(t, report.Pass, got.Status, got.Message)
	assert.Contains(t, got.Message, "3 transitions")

	got = matchTransitionTimes(ref, []Observed{
		readyAt("False", "2026-12-02T10:00:00Z"),
		readyAt("True", "2026-12-02T10:00:03Z"),
		readyAt("True", "2026-12-02T10:00:05Z"),
	}, ready)
	assert.Equal(t, report.Fail, got.Status)
	assert.Contains(t, got.Message, "stayed True, yet its lastTransitionTime moved from 2026-12-02T10:00:03Z to 2026-12-02T10:00:05Z")

	got = matchTransitionTimes(ref, []Observed{
		readyAt("True", "2026-12-02T10:00:03Z"), {}, readyAt("True", "2026-12-02T10:00:09Z"),
	}, ready)
	assert.Equal(t, report.Error, got.Status, "deleted and made again is a new life; nothing was compared: %s", got.Message)

	got = matchTransitionTimes(ref, []Observed{readyAt("True", "2026-12-02T10:00:03Z")}, []string{"Progressing"})
	assert.Equal(t, report.Error, got.Status, "no condition to judge: the check could not run")
}
