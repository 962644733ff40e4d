package checks

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/labctl/labctl/internal/report"
)

// What lab 6.4's metrics.go serves once a Database in namespace ns has
// been reconciled, in Prometheus' text format.
const labMetrics = `# HELP database_reconcile_total Total number of reconciliations per controller
# TYPE database_reconcile_total counter
database_reconcile_total{result="success"} 4
# HELP database_reconcile_duration_seconds Duration of reconciliations in seconds
# TYPE database_reconcile_duration_seconds histogram
database_reconcile_duration_seconds_bucket{result="success",le="0.005"} 2
database_reconcile_duration_seconds_bucket{result="success",le="+Inf"} 4
database_reconcile_duration_seconds_sum{result="success"} 0.02
database_reconcile_duration_seconds_count{result="success"} 4
# HELP database_info Information about Database resources
# TYPE database_info gauge
database_info{image="postgres:14",name="test-metrics",namespace="ns",phase="Ready"} 1
# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="database",result="success"} 4
`

func TestJudgeMetrics(t *testing.T) {
	p := &metricsParams{Families: []metricFamily{
		{Name: "database_reconcile_total", Type: "counter", Labels: []string{"result"}},
		{Name: "database_reconcile_duration_seconds", Type: "histogram", Labels: []string{"result"}},
		{Name: "database_info", Type: "gauge", Match: map[string]string{"name": "test-metrics", "namespace": "$(NAMESPACE)"}},
	}}
	judge := func(status int, body string, err error) Outcome {
		return judgeMetrics(status, []byte(body), err, "sys/controller-manager", "ns", p)
	}
	out := judge(http.StatusOK, labMetrics, nil)
	assert.Equal(t, report.Pass, out.Status, out.Message)

	out = judge(http.StatusOK, labMetrics, nil)
	assert.Contains(t, out.Message, `database_info{name="test-metrics",namespace="ns"} (gauge)`)

	for _, tc := range []struct {
		name, body string
		says       string
	}{
		{"another namespace's Database", strings.ReplaceAll(labMetrics, `namespace="ns"`, `namespace="default"`), `no series of database_info has {name="test-metrics",namespace="ns"}`},
		{"no result label", strings.ReplaceAll(labMetrics, `database_reconcile_total{result="success"}`, `database_reconcile_total`), "no series of database_reconcile_total has the labels result"},
		{"a gauge for a counter", strings.ReplaceAll(labMetrics, "# TYPE database_reconcile_total counter", "# TYPE database_reconcile_total gauge"), "database_reconcile_total is a gauge, not a counter"},
		{"no series set", strings.ReplaceAll(labMetrics, "database_info{image=\"postgres:14\",name=\"test-metrics\",namespace=\"ns\",phase=\"Ready\"} 1\n", ""), "database_info is not served"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := judge(http.StatusOK, tc.body, nil)
			assert.Equal(t, report.Fail, out.Status, out.Message)
			assert.Contains(t, out.Message, tc.says)
		})
	}
	out = judge(http.StatusOK, "controller_runtime_reconcile_total 1\n", nil)
	assert.Equal(t, report.Fail, out.Status)
	assert.Contains(t, out.Message, "database_info is not served")
	assert.Equal(t, "1 families served, none named database_…", out.Observed)

	out = judge(http.StatusForbidden, "Authorization denied for user system:serviceaccount:sys:controller-manager", nil)
	assert.Equal(t, report.Skipped, out.Status, "a refused scrape says nothing of the metrics")
	assert.Contains(t, out.Message, "refused the token of ServiceAccount sys/controller-manager (403 Forbidden)")
	assert.Contains(t, out.Expected, "metrics-reader ClusterRole")

	out = judge(0, "", errors.New("connection refused"))
	assert.Equal(t, report.Fail, out.Status)
	assert.Contains(t, out.Message, "did not answer: connection refused")

	out = judge(http.StatusOK, "<html>not metrics</html>", nil)
	assert.Equal(t, report.Fail, out.Status)
	assert.Contains(t, out.Message, "does not serve Prometheus' text format")
}
