//go:build unix

package honesty_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/report"
)

// checkStep is a step of one Go check with its parameters, for a lab
// made in a test (runSteps).
func checkStep(t *testing.T, id, check string, with map[string]any) labs.Step {
	t.Helper()
	raw, err := json.Marshal(with)
	require.NoError(t, err)
	return labs.Step{ID: id, Tasks: []string{"1"}, Title: labs.Text{EN: id}, Check: &labs.GoCheck{Name: check, With: raw}}
}

// runSteps runs steps as one scenario of a one-task lab, each with
// timeout to wait, against op (nil: none) in namespace ns ("": a fresh
// one), and returns the results by step.
func runSteps(ctx context.Context, t *testing.T, op *operator.Operator, ns string, timeout time.Duration, steps ...labs.Step) map[string]*report.CheckResult {
	t.Helper()
	lab := &labs.Lab{APIVersion: "labctl.dev/v1alpha1", Kind: "Lab", ID: "lab-0.9", Title: labs.Text{EN: t.Name()},
		Defaults:  labs.Defaults{Timeout: labs.Timeout{Local: timeout, Kind: timeout}, For: labs.Timeout{Local: time.Second, Kind: time.Second}},
		Tasks:     []labs.Task{{ID: "1", Points: 10, Title: labs.Text{EN: t.Name()}}},
		Scenarios: []labs.Scenario{{Name: "steps", Steps: steps}}}
	require.NoError(t, checks.Validate(lab))
	rep, err := checks.Run(ctx, checks.Options{Lab: lab, Cluster: env.Cluster, Operator: op, Namespace: ns, Lang: "en"})
	require.NoError(t, err)
	got := map[string]*report.CheckResult{}
	for _, task := range rep.Tasks {
		for _, c := range task.Checks {
			got[c.ID] = c
		}
	}
	for _, s := range steps {
		require.Contains(t, got, s.ID)
	}
	return got
}
