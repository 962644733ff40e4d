package checks

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// verdictParams configure test-verdict, a Go check that returns the status in its parameters,
// so a scenario's gating can be tested without a cluster.
type verdictParams struct {
	Status report.Result `json:"status"`
}

func init() {
	Register(Typed(Definition{Name: "test-verdict", Doc: "returns the status it is given (tests only)"},
		func(_ context.Context, _ *Context, p *verdictParams) Outcome {
			return Outcome{Status: p.Status, Message: "as told"}
		}))
}

func verdictStep(id, task string, status report.Result, gate bool) labs.Step {
	with, _ := json.Marshal(verdictParams{Status: status})
	return labs.Step{ID: id, Tasks: []string{task}, Gate: gate,
		Title: labs.Text{EN: "check " + id},
		Check: &labs.GoCheck{Name: "test-verdict", With: with}}
}

// A failed gate stops the steps after it, and they are skips that name
// the gate (they could not run), not errors: their task is not judged,
// and the mistake is charged once, to the gate's task.
func TestFailedGateSkipsWhatFollowsAndNamesIt(t *testing.T) {
	lab := &labs.Lab{ID: "lab-t", Tasks: []labs.Task{{ID: "1", Points: 10}, {ID: "2", Points: 20}}}
	sc := &labs.Scenario{Name: "s", Steps: []labs.Step{
		verdictStep("before", "2", report.Pass, false),
		verdictStep("ready", "1", report.Fail, true),
		verdictStep("after", "2", report.Pass, false),
	}}
	lab.Scenarios = []labs.Scenario{*sc}
	r := &run{o: Options{Lang: "en", Lab: lab}, lab: lab, profile: labs.ProfileLocal}
	got := map[string]*report.CheckResult{}
	r.runScenario(context.Background(), sc, func(c *report.CheckResult) { got[c.ID] = c })

	require.Equal(t, report.Pass, got["before"].Status)
	require.Equal(t, report.Fail, got["ready"].Status)
	require.Equal(t, report.Skipped, got["after"].Status)
	require.Equal(t, `not run: gate 1 "check ready" failed`, got["after"].Message)
	require.Equal(t, "ready", got["after"].BlockedBy)
	require.Empty(t, got["before"].BlockedBy)
	// Task 2 is not judged (its evidence after the gate was not taken),
	// rather than failed or errored.
	require.Equal(t, report.Skipped, report.TaskStatus([]*report.CheckResult{got["before"], got["after"]}))
}
