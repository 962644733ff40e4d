//go:build unix

package honesty_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/report"
)

// testMetricsScraped scrapes the running reference manager as lab 6.4
// does: over HTTPS with its own ServiceAccount's token (bound to the
// metrics-reader ClusterRole by config/rbac), which the manager's
// authn/authz filter checks with the API server. The reconcile metrics of
// the verifies before are there; a ServiceAccount without the binding is
// refused.
func testMetricsScraped(t *testing.T, op *operator.Operator) {
	require.NotNil(t, op.Metrics, "the local deploy records where the manager serves its metrics")
	step := func(id, account string) labs.Step {
		with, err := json.Marshal(map[string]any{"account": account, "families": []map[string]any{
			{"name": "database_reconcile_total", "type": "counter", "labels": []string{"result"}},
			{"name": "database_reconcile_duration_seconds", "type": "histogram", "labels": []string{"result"}},
			{"name": "controller_runtime_reconcile_total", "match": map[string]string{"controller": "database"}},
		}})
		require.NoError(t, err)
		return labs.Step{ID: id, Tasks: []string{"1"}, Title: labs.Text{EN: id}, Check: &labs.GoCheck{Name: "metrics", With: with}}
	}
	lab := &labs.Lab{APIVersion: "labctl.dev/v1alpha1", Kind: "Lab", ID: "lab-0.9", Title: labs.Text{EN: "metrics"},
		Defaults: labs.Defaults{Timeout: labs.Timeout{Local: 2 * time.Second, Kind: 2 * time.Second}, For: labs.Timeout{Local: time.Second, Kind: time.Second}},
		Tasks:    []labs.Task{{ID: "1", Points: 10, Title: labs.Text{EN: "metrics"}}},
		Scenarios: []labs.Scenario{{Name: "metrics", Steps: []labs.Step{
			step("own-account", ""),
			step("unbound-account", op.Namespace+"/default"),
		}}}}
	require.NoError(t, checks.Validate(lab))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := checks.Run(ctx, checks.Options{Lab: lab, Cluster: env.Cluster, Operator: op, Lang: "en"})
	require.NoError(t, err)
	got := map[string]*report.CheckResult{}
	for _, task := range rep.Tasks {
		for _, c := range task.Checks {
			got[c.ID] = c
		}
	}
	require.Contains(t, got, "own-account")
	assert.Equal(t, report.Pass, got["own-account"].Status, got["own-account"].Message)
	assert.Equal(t, report.Fail, got["unbound-account"].Status, got["unbound-account"].Message)
	assert.Contains(t, got["unbound-account"].Message, "(403 Forbidden): it may not get /metrics")
}
