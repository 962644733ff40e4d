//go:build unix

package honesty_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		return checkStep(t, id, "metrics", map[string]any{"account": account, "families": []map[string]any{
			{"name": "database_reconcile_total", "type": "counter", "labels": []string{"result"}},
			{"name": "database_reconcile_duration_seconds", "type": "histogram", "labels": []string{"result"}},
			{"name": "controller_runtime_reconcile_total", "match": map[string]string{"controller": "database"}},
		}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := runSteps(ctx, t, op, "", 2*time.Second, step("own-account", ""), step("unbound-account", op.Namespace+"/default"))
	assert.Equal(t, report.Pass, got["own-account"].Status, got["own-account"].Message)
	assert.Equal(t, report.Fail, got["unbound-account"].Status, got["unbound-account"].Message)
	assert.Contains(t, got["unbound-account"].Message, "(403 Forbidden): it may not get /metrics")
}
