package checks

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

func phaseState(phase string) Observed {
	return Observed{Object: &unstructured.Unstructured{Object: map[string]any{
		"kind": "Database", "metadata": map[string]any{"name": "test-db"},
		"status": map[string]any{"phase": phase},
	}}}
}

func phaseIs(phase string) []labs.Assertion {
	raw, _ := json.Marshal(phase)
	return []labs.Assertion{{Path: "status.phase", Equals: raw}}
}

func TestMatchSequence(t *testing.T) {
	ref := labs.Ref{Kind: "database", Name: "test-db"}
	want := [][]labs.Assertion{phaseIs("Provisioning"), phaseIs("Deploying"), phaseIs("Ready")}
	states := func(phases ...string) []Observed {
		var out []Observed
		for _, p := range phases {
			out = append(out, phaseState(p))
		}
		return out
	}

	got := matchSequence(ref, states("Pending", "Provisioning", "Configuring", "Deploying", "Deploying", "Verifying", "Ready"), want)
	assert.Equal(t, report.Pass, got.Status, got.Message)

	got = matchSequence(ref, append(states("Ready", "Provisioning"), append([]Observed{{}}, states("Deploying", "Ready")...)...), want)
	assert.Equal(t, report.Pass, got.Status, "a state seen earlier counts again later; deletions are skipped")

	got = matchSequence(ref, states("Provisioning", "Ready", "Deploying"), want)
	assert.Equal(t, report.Fail, got.Status)
	assert.Contains(t, got.Message, `reached status.phase = "Deploying" but was never observed with status.phase = "Ready" after it`)
	assert.Contains(t, got.Observed, "phase Provisioning → Database test-db phase Ready")

	got = matchSequence(ref, nil, want)
	assert.Equal(t, report.Fail, got.Status)
	assert.Equal(t, "no state of database/test-db was seen", got.Observed)
}

func TestMatchNever(t *testing.T) {
	ref := labs.Ref{Kind: "database", Name: "test-db"}
	readyTrue := func(phase string) Observed {
		o := phaseState(phase)
		o.Object.Object["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "Ready", "status": "True"}}
		return o
	}
	state := []labs.Assertion{
		{Path: "status.phase", In: []any{"Provisioning", "Deploying"}},
		{Condition: &labs.Condition{Type: "Ready", Status: "True"}},
	}
	got := matchNever(ref, []Observed{readyTrue("Ready"), phaseState("Provisioning"), {}, phaseState("Deploying"), readyTrue("Ready")}, state)
	assert.Equal(t, report.Pass, got.Status, got.Message)

	got = matchNever(ref, []Observed{readyTrue("Ready"), readyTrue("Provisioning"), phaseState("Deploying")}, state)
	assert.Equal(t, report.Fail, got.Status)
	assert.Contains(t, got.Message, "database/test-db was written with")
	assert.Contains(t, got.Observed, "phase Provisioning")

	got = matchNever(ref, nil, state)
	assert.Equal(t, report.Error, got.Status, "nothing recorded is not a pass")
}
