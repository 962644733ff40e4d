package checks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/satoken"
)

func init() {
	Register(Typed(Definition{
		Name:       "metrics",
		Doc:        "the manager's metrics endpoint, scraped as Prometheus does with a ServiceAccount's token, serves these metric families and series",
		Namespaced: true,
	}, runMetrics))
}

type metricsParams struct {
	// Families the manager must serve.
	Families []metricFamily `json:"families"`
	// Account is the ServiceAccount (namespace/name) whose token scrapes;
	// by default the operator's own, as lab 6.4 does with kubectl create
	// token.
	Account string `json:"account,omitempty"`
}

type metricFamily struct {
	Name string `json:"name"`
	// Type is counter, gauge or histogram ("": any).
	Type string `json:"type,omitempty"`
	// Labels: one series carries all of these label names.
	Labels []string `json:"labels,omitempty"`
	// Match: one series has these label values ($(NAMESPACE) is the
	// run's namespace).
	Match map[string]string `json:"match,omitempty"`
}

func (p *metricsParams) Validate() error {
	if len(p.Families) == 0 {
		return errors.New("needs families")
	}
	for _, f := range p.Families {
		if f.Name == "" {
			return errors.New("each family needs a name")
		}
		if f.Type != "" && f.Type != "counter" && f.Type != "gauge" && f.Type != "histogram" {
			return fmt.Errorf("family %s: type is counter, gauge or histogram, not %q", f.Name, f.Type)
		}
	}
	if p.Account != "" && strings.Count(p.Account, "/") != 1 {
		return errors.New("account is namespace/name")
	}
	return nil
}

// metricsPoll is how often the endpoint is scraped while a series is
// missing: a Database's series appears with its first reconcile.
const metricsPoll = 250 * time.Millisecond

func runMetrics(ctx context.Context, c *Context, p *metricsParams) Outcome {
	op := c.Operator()
	if op == nil || op.Metrics == nil {
		return skip("labctl knows no metrics endpoint of the operator (none deployed by labctl on the local provider), so its metrics cannot be read")
	}
	account := op.Namespace + "/" + op.ServiceAccount
	if p.Account != "" {
		account = p.Account
	}
	out, refused := scrapeMetrics(ctx, c, account, false, p)
	if !refused || p.Account != "" {
		return out
	}
	// The operator's own account may not read its metrics: that is the
	// lab's RBAC task, charged there. What the manager serves is judged
	// all the same, read by an account of labctl's own.
	reader, err := ensureMetricsReader(ctx, c)
	if err != nil {
		return errorf("%s", oneLine(err))
	}
	out, _ = scrapeMetrics(ctx, c, reader, true, p)
	out.Message += fmt.Sprintf(" (read as %s: the endpoint refused the operator's ServiceAccount %s)", reader, account)
	return out
}

// scrapeMetrics scrapes with a token of account (namespace/name) until the
// families are served or the step's time is up. A refused token ends it
// at once (refused), unless waitForAccess: a binding just made takes a
// moment to reach the authorizer.
func scrapeMetrics(ctx context.Context, c *Context, account string, waitForAccess bool, p *metricsParams) (out Outcome, refused bool) {
	ns, name, _ := strings.Cut(account, "/")
	token, _, err := satoken.Request(ctx, c.Config(), ns, name, 10*time.Minute)
	if err != nil {
		return errorf("%s", oneLine(err)), false
	}
	err = wait.PollUntilContextTimeout(ctx, metricsPoll, c.Timeout, true, func(ctx context.Context) (bool, error) {
		status, body, err := c.Operator().Metrics(ctx, token)
		if err != nil && ctx.Err() != nil && out.Status != "" {
			return false, nil // the step's time ran out mid-scrape: the last whole scrape stands
		}
		out = judgeMetrics(status, body, err, account, c.Namespace(), p)
		refused = status == http.StatusUnauthorized || status == http.StatusForbidden
		return out.Status == report.Pass || (refused && !waitForAccess), nil
	})
	if err != nil && out.Status == "" {
		return errorf("scraping the metrics: %s", oneLine(err)), false
	}
	return out, refused
}

// judgeMetrics decides from one scrape whether the families are served.
func judgeMetrics(status int, body []byte, err error, account, namespace string, p *metricsParams) Outcome {
	expected := "the families " + describeFamilies(p.Families, namespace)
	switch {
	case err != nil:
		return Outcome{Status: report.Fail, Message: "the manager's metrics endpoint did not answer: " + oneLine(err), Expected: expected}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// Not a verdict on the metrics: they could not be read. Whether
		// the account may read them is the RBAC's task (lab 6.4's 2.1,
		// an rbac check on /metrics), charged there once.
		return Outcome{Status: report.Skipped,
			Message:  fmt.Sprintf("the metrics could not be read: the endpoint refused the token of ServiceAccount %s (%d %s), which may not get /metrics", account, status, http.StatusText(status)),
			Expected: "a ClusterRoleBinding of the metrics-reader ClusterRole to " + account + " (config/rbac/metrics_reader_role_binding.yaml, listed in config/rbac/kustomization.yaml)",
			Observed: strings.TrimSpace(string(body))}
	case status != http.StatusOK:
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("the metrics endpoint answered %d %s", status, http.StatusText(status)), Expected: expected}
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return Outcome{Status: report.Fail, Message: "the metrics endpoint does not serve Prometheus' text format: " + oneLine(err), Expected: expected}
	}
	var problems []string
	for _, want := range p.Families {
		if problem := familyProblem(families[want.Name], want, namespace); problem != "" {
			problems = append(problems, problem)
		}
	}
	if len(problems) == 0 {
		return pass("the manager serves %s", describeFamilies(p.Families, namespace))
	}
	return Outcome{Status: report.Fail,
		Message:  "the manager's metrics: " + strings.Join(problems, "; "),
		Expected: expected,
		Observed: servedLike(families, p.Families)}
}

// familyProblem says what is wrong with a served family (nil: not served).
func familyProblem(mf *dto.MetricFamily, want metricFamily, namespace string) string {
	if mf == nil {
		return want.Name + " is not served (registered with metrics.Registry.MustRegister in an init function, and observed at least once?)"
	}
	if got := strings.ToLower(mf.GetType().String()); want.Type != "" && got != want.Type {
		return fmt.Sprintf("%s is a %s, not a %s", want.Name, got, want.Type)
	}
	var labelled bool
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if !hasLabels(labels, want.Labels) {
			continue
		}
		labelled = true
		if matches(labels, want.Match, namespace) {
			return ""
		}
	}
	if !labelled {
		return fmt.Sprintf("no series of %s has the labels %s", want.Name, strings.Join(want.Labels, ", "))
	}
	return fmt.Sprintf("no series of %s has %s", want.Name, describeMatch(want.Match, namespace))
}

func hasLabels(labels map[string]string, names []string) bool {
	for _, n := range names {
		if _, ok := labels[n]; !ok {
			return false
		}
	}
	return true
}

func matches(labels, match map[string]string, namespace string) bool {
	for k, v := range match {
		if labels[k] != strings.ReplaceAll(v, labs.NamespaceVar, namespace) {
			return false
		}
	}
	return true
}

func describeMatch(match map[string]string, namespace string) string {
	var parts []string
	for k, v := range match {
		parts = append(parts, fmt.Sprintf("%s=%q", k, strings.ReplaceAll(v, labs.NamespaceVar, namespace)))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

func describeFamilies(fams []metricFamily, namespace string) string {
	var parts []string
	for _, f := range fams {
		s := f.Name
		if len(f.Match) > 0 {
			s += describeMatch(f.Match, namespace)
		} else if len(f.Labels) > 0 {
			s += "{" + strings.Join(f.Labels, ",") + "}"
		}
		if f.Type != "" {
			s += " (" + f.Type + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// servedLike lists the served families that share a prefix with the ones
// asked for (database_ for database_info): what the student did register.
func servedLike(families map[string]*dto.MetricFamily, want []metricFamily) string {
	var prefixes []string
	for _, w := range want {
		if i := strings.IndexByte(w.Name, '_'); i > 0 {
			prefixes = append(prefixes, w.Name[:i+1])
		}
	}
	var served []string
	for name, mf := range families {
		for _, pre := range prefixes {
			if strings.HasPrefix(name, pre) {
				served = append(served, fmt.Sprintf("%s (%s, %d series)", name, strings.ToLower(mf.GetType().String()), len(mf.GetMetric())))
				break
			}
		}
	}
	if len(served) == 0 {
		return fmt.Sprintf("%d families served, none named %s…", len(families), strings.Join(slices.Compact(prefixes), "… or "))
	}
	slices.Sort(served)
	return strings.Join(served, ", ")
}
