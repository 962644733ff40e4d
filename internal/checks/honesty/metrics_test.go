//go:build unix

package honesty_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got := runSteps(ctx, t, op, "", 2*time.Second, step("own-account", ""), step("unbound-account", op.Namespace+"/default"))
	assert.Equal(t, report.Pass, got["own-account"].Status, got["own-account"].Message)
	assert.Equal(t, report.Skipped, got["unbound-account"].Status, got["unbound-account"].Message)
	assert.Contains(t, got["unbound-account"].Message, "(403 Forbidden), which may not get /metrics")

	// When the operator's own account may not read them (lab 6.4's
	// binding left out), the metrics are read by labctl's own reader, a
	// ServiceAccount of the run's namespace whose ClusterRole and binding
	// go with that namespace.
	unbound := *op
	unbound.ServiceAccount = "default"
	got = runSteps(ctx, t, &unbound, "", 2*time.Second, step("operator-refused", ""))
	out := got["operator-refused"]
	assert.Equal(t, report.Pass, out.Status, out.Message)
	require.Contains(t, out.Message, "/labctl-metrics-reader: the endpoint refused the operator's ServiceAccount "+op.Namespace+"/default)")
	runNS := out.Message[strings.LastIndex(out.Message, "(read as ")+len("(read as ") : strings.LastIndex(out.Message, "/labctl-metrics-reader")]
	for _, obj := range []client.Object{&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}} {
		key := client.ObjectKey{Name: "labctl-metrics-reader-" + runNS}
		assert.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(env.Client.Get(ctx, key, obj)), nil
		}), "%T %s is collected with the run's namespace", obj, key.Name)
	}
}
