//go:build unix

// Package honesty_test proves the checks honest: on one shared local
// cluster, verify passes every task of every lab against the reference
// operator, and against each mutant (the reference with one real student
// mistake put back, testdata/mutants/*.patch) exactly the intended tasks
// fail.
package honesty_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/cli/cmdutil"
	verifycmd "github.com/labctl/labctl/internal/cli/verify"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/local"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/supervise"
	"github.com/labctl/labctl/internal/testcluster"
	"github.com/labctl/labctl/internal/userr"
	labsfs "github.com/labctl/labctl/labs"
)

var env *testcluster.Cluster

func TestMain(m *testing.M) {
	supervise.MaybeRun() // RunLocal re-executes this binary as the manager's supervisor
	ctrllog.SetLogger(logr.Discard())
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	if err := lockWorkDir(); err != nil {
		fmt.Fprintln(os.Stderr, "honesty:", err)
		os.Exit(1)
	}
	testcluster.Main(m, &env)
}

func loadLab(t testing.TB, labID string) *labs.Lab {
	t.Helper()
	all, err := allLabs()
	require.NoError(t, err)
	lab, ok := labs.Find(all, labID)
	require.True(t, ok, labID)
	return lab
}

func verify(t testing.TB, labID string, op *operator.Operator, projectDir string, tasks ...string) *report.Report {
	t.Helper()
	return verifyOn(t, env, labID, op, projectDir, tasks...)
}

// verifyOn verifies the lab on cluster c.
func verifyOn(t testing.TB, c *testcluster.Cluster, labID string, op *operator.Operator, projectDir string, tasks ...string) *report.Report {
	t.Helper()
	lab := loadLab(t, labID)
	// Every step has its own timeout; this only stops a run that hangs.
	// Lab 6.2 runs the project's tests ten times (minutes, loaded).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	_, bench := t.(*testing.B)
	progress := func(c *report.CheckResult) {
		if !bench { // a timeline of the run, shown when a test fails (or with -v)
			t.Logf("%6.2fs %s %s", time.Since(start).Seconds(), c.Status, c.ID)
		}
	}
	rep, err := checks.Run(ctx, checks.Options{Lab: lab, Cluster: c.Cluster, Operator: op, ProjectDir: projectDir, Tasks: tasks, OnCheck: progress})
	require.NoError(t, err)
	if !bench {
		t.Logf("%6.2fs done (write round trip %s)", time.Since(start).Seconds(), rep.WriteLatency)
		for _, n := range rep.Notes {
			t.Logf("note: %s", n)
		}
	}
	return rep
}

func render(rep *report.Report) string {
	var b bytes.Buffer
	s, _, _ := iostreams.Test(false)
	_ = report.WriteText(&b, s.Styles(), rep, true)
	return b.String()
}

// mutants: each patch in testdata/mutants and exactly the tasks of its lab
// that must fail against it. Everything else must pass.
var mutants = []struct {
	name  string
	lab   string
	fails []string
}{
	{"project-wrong-domain", "lab-3.2", []string{"1.1"}},
	{"project-without-database", "lab-3.2", []string{"1.2", "3.1"}},
	{"username-optional", "lab-3.2", []string{"2.1"}},
	{"storage-pattern-unanchored", "lab-3.2", []string{"2.1"}},
	{"storage-pattern-alternation", "lab-3.2", []string{"2.1"}},
	{"phase-without-enum", "lab-3.2", []string{"2.2"}},
	{"no-age-column", "lab-3.2", []string{"2.3", "5.2"}},
	{"age-column-typed-string", "lab-3.2", []string{"2.3"}},
	{"ready-column-typed-string", "lab-3.2", []string{"2.3"}},
	{"stale-database-crd", "lab-3.2", []string{"3.1", "4.1"}},
	{"username-needs-digit", "lab-3.2", []string{"4.2", "6.2"}},
	{"replicas-without-maximum", "lab-3.2", []string{"2.1", "4.3"}},
	{"replicas-without-default", "lab-3.2", []string{"2.1", "6.2"}},
	{"statefulsets-without-update", "lab-3.3", []string{"1.1"}},
	{"secret-without-database", "lab-3.3", []string{"2.2"}},
	{"storage-size-ignored", "lab-3.3", []string{"3.2"}},
	{"service-port-80", "lab-3.3", []string{"4.2"}},
	{"status-without-endpoint", "lab-3.3", []string{"5.1"}},
	{"endpoint-default-namespace", "lab-3.3", []string{"5.1"}},
	{"endpoint-operator-namespace", "lab-4.4", []string{"3.2"}},
	{"no-owns-service", "lab-3.3", []string{"6.1"}},
	{"password-regenerated", "lab-3.3", []string{"5.1", "8.1"}}, // and the new Secret re-triggers the watch: a write loop that never rests (at-rest, 5.1)
	{"secret-not-owned", "lab-3.3", []string{"2.2"}},            // the finalizer's cleanup deletes the Secret even without an owner reference
	{"finalizer-left-on-delete", "lab-3.3", []string{"cleanup"}},
	{"replicas-never-updated", "lab-3.3", []string{"8.2"}},
	{"annotate-last-reconciled", "lab-3.3", []string{"5.1"}},
	{"database-notfound-as-error", "lab-3.3", []string{"cleanup"}},
	{"database-get-error-wrapped", "lab-3.3", []string{"cleanup"}},
	{"no-owns-statefulset", "lab-3.4", []string{"4.1", "4.2", "6.3"}},
	{"no-owns-secret", "lab-3.4", []string{"4.1"}},
	{"update-instead-of-patch", "lab-3.4", []string{"2.1", "2.2", "6.1"}},
	{"no-conflict-retry", "lab-3.4", []string{"3.1", "3.2"}},
	{"retry-loses-change", "lab-3.4", []string{"3.1", "3.2", "6.2"}},
	{"missing-field-index", "lab-3.4", nil}, // the lab text's own bug B3: a warning (see warnings)
	{"lookups-filter-in-go", "lab-3.4", []string{"5.1"}},
	{"no-owner-reference", "lab-3.4", []string{"4.1", "4.2", "6.3"}}, // the finalizer's cleanup deletes the children even without owner references
	{"deletion-never-finishes", "lab-3.4", []string{"cleanup"}},
	{"list-helpers-missing", "lab-3.4", []string{"1.1", "1.2"}},
	{"merge-patch-after-change", "lab-3.4", []string{"2.1", "2.2", "4.1", "4.2", "6.1", "6.2"}},
	{"no-observed-generation-field", "lab-4.1", []string{"1.1"}},
	{"progressing-never-complete", "lab-4.1", []string{"4.3", "5.1"}},
	{"scaling-reported-as-creating", "lab-4.1", []string{"5.1"}},
	{"condition-without-observed-generation", "lab-4.1", []string{"5.2"}},
	{"condition-replaced-with-now", "lab-4.1", []string{"4.3"}},
	{"condition-removed-then-set", "lab-4.1", []string{"4.3"}},
	{"no-finalizer", "lab-4.2", []string{"3.2", "4.2"}},
	{"finalizer-never-removed", "lab-4.2", []string{"3.4", "4.2", "5.2"}},
	{"cleanup-failure-silent", "lab-4.2", []string{"4.2"}},
	{"cleanup-not-idempotent", "lab-4.2", []string{"4.2"}},
	{"finalizers-cleared", "lab-4.2", []string{"3.4"}},
	{"finalizer-removed-by-index", "lab-4.2", []string{"3.4"}},
	{"cleanup-orphans-pods", "lab-4.2", []string{"3.4"}},
	{"cleanup-orphans-statefulset-pods", "lab-4.2", []string{"3.4"}},
	{"cleanup-forgets-statefulset", "lab-4.2", []string{"3.4"}},
	{"statefulset-delete-filtered", "lab-4.3", []string{"1.2"}},
	{"statefulset-missing-ignored-when-ready", "lab-4.3", []string{"1.2"}},
	{"statefulset-missing-requeued-later", "lab-4.3", []string{"1.2"}},
	{"no-secret-watch", "lab-4.3", []string{"2.2"}},
	{"secret-owner-not-controller", "lab-4.3", []string{"2.2"}},
	{"secret-map-func-own-name", "lab-4.3", []string{"2.2"}},
	{"no-image-index", "lab-4.3", []string{"3.1"}},
	{"image-index-extracts-database-name", "lab-4.3", []string{"3.1"}},
	{"image-index-on-statefulsets", "lab-4.3", []string{"3.1"}},
	{"image-ignored", "lab-4.3", []string{"3.3"}},
	{"no-statefulset-predicate", "lab-4.3", []string{"4.1"}},
	{"statefulset-predicate-inverted-generation", "lab-4.3", []string{"4.1"}},
	{"statefulset-predicate-resource-version", "lab-4.3", []string{"4.1"}},
	{"db-replicas-never-scaled", "lab-4.3", []string{"5.2"}},
	{"phase-enum-without-new-phases", "lab-4.4", []string{"1.0", "3.2", "3.3", "5.1"}},
	{"progressing-left-true", "lab-4.4", []string{"3.2"}},
	{"requeue-without-unit", "lab-4.4", []string{"3.2"}},
	{"configuring-skipped", "lab-4.4", []string{"3.3"}},
	{"ready-before-replicas", "lab-4.4", []string{"3.2", "3.3"}}, // and an unready Database flips between phases without rest (at-rest, 3.2)
	{"missing-statefulset-recreated-silently", "lab-4.4", []string{"5.1"}},
	{"endpoint-without-namespace", "lab-4.4", []string{"3.2"}}, // one field wrong: only the task that asks for it, not those behind the Ready gate
	{"ready-kept-on-missing-statefulset", "lab-4.4", []string{"5.1"}},
	{"ready-condition-set-only-when-ready", "lab-4.4", []string{"5.1"}},
	{"project-without-backup", "lab-8.2", []string{"1.1"}},
	{"retention-unvalidated", "lab-8.2", []string{"1.2"}},
	{"stale-backup-crd", "lab-8.2", []string{"1.2", "1.3", "4.2"}},
	{"panic-on-missing-database", "lab-8.2", []string{"1.4", "1.5", "4.1", "4.2"}},
	{"database-crd-without-backupref", "lab-8.2", []string{"2.1", "2.2", "3.2"}},
	{"missing-backups-rbac", "lab-8.2", []string{"1.4", "1.5", "2.2", "3.1", "3.2", "4.1", "4.2", "4.3", "cleanup"}},
	{"never-sets-backupready", "lab-8.2", []string{"3.1"}},
	{"phase-based-backup-check", "lab-8.2", []string{"3.2"}},
	{"backup-not-waiting-for-ready", "lab-8.2", []string{"1.4", "4.2"}},
	{"silent-backup-controller", "lab-8.2", []string{"4.3"}},
	{"backup-volume-not-owned", "lab-8.2", []string{"cleanup"}},
	{"ready-counts-replicas", "lab-8.2", []string{"4.2"}},
	{"backup-logger-without-context", "lab-8.2", []string{"4.3"}},
	{"manager-without-controllers", "lab-8.2", []string{"1.4", "1.5", "2.2", "3.1", "3.2", "4.1", "4.2", "4.3", "cleanup"}},
	{"website-without-shortname", "lab-1.4", []string{"1.1"}},
	{"website-version-not-served", "lab-1.4", []string{"1.1", "1.2", "2.1", "2.2", "3.1", "3.2", "3.3", "3.4", "3.5", "4.1", "4.2"}},
	{"website-only-https", "lab-1.4", []string{"1.1", "2.2"}},
	{"website-replicas-optional", "lab-1.4", []string{"1.1", "3.1"}},
	{"website-url-without-pattern", "lab-1.4", []string{"1.1", "3.2"}},
	{"website-replicas-without-minimum", "lab-1.4", []string{"1.1", "3.3"}},
	{"website-environment-without-enum", "lab-1.4", []string{"1.1", "3.4"}},
	{"website-environment-without-default", "lab-1.4", []string{"1.1", "3.5"}},
	{"website-replicas-maximum-4", "lab-1.4", []string{"1.1", "2.2", "4.1", "4.2"}},
	{"hello-project-wrong-repo", "lab-2.4", []string{"1.2"}},
	{"hello-project-without-helloworld", "lab-2.4", []string{"2.1", "3.2"}},
	{"hello-count-without-maximum", "lab-2.4", []string{"3.1"}},
	{"hello-stale-crd", "lab-2.4", []string{"3.2", "5.1"}},
	{"hello-configmaps-without-delete", "lab-2.4", []string{"4.1"}},
	{"hello-no-configmap-owner-reference", "lab-2.4", []string{"5.3", "7.1"}},
	{"hello-status-never-set", "lab-2.4", []string{"5.4"}},
	{"hello-requeue-without-unit", "lab-2.4", []string{"5.4"}},
	{"hello-message-not-propagated", "lab-2.4", []string{"6.1"}},
	{"hello-count-minimum-5", "lab-2.4", []string{"3.1", "8.1"}},
	{"hello-no-reconcile-logs", "lab-3.1", []string{"2.2"}},
	{"hello-requeue-without-requeueafter", "lab-3.1", []string{"3.2"}},
	{"hello-requeue-after-bare-number", "lab-3.1", []string{"3.2"}},
	{"hello-requeue-after-duration-cast", "lab-3.1", []string{"3.2"}},
	{"hello-configmap-without-message", "lab-3.1", []string{"4.1"}},
	{"hello-count-not-updated", "lab-3.1", []string{"4.2"}},
	{"hello-notfound-as-error", "lab-3.1", []string{"6.1"}},
	{"logger-not-from-context", "lab-6.4", []string{"1.3"}},
	{"transition-not-logged", "lab-6.4", []string{"1.3"}},
	{"transition-printed", "lab-6.4", []string{"1.3"}},
	{"children-created-silently", "lab-6.4", []string{"1.3"}},
	// The scrape of 2.5 then reads as labctl's own reader: one defect,
	// charged once.
	{"no-metrics-reader-binding", "lab-6.4", []string{"2.1"}},
	{"metrics-reader-binding-not-listed", "lab-6.4", []string{"2.1"}},
	{"metrics-reader-bound-to-default", "lab-6.4", []string{"2.1"}},
	{"metrics-reader-binding-to-auth-role", "lab-6.4", []string{"2.1"}},
	{"metrics-on-default-registry", "lab-6.4", []string{"2.5"}},
	{"reconcile-not-instrumented", "lab-6.4", []string{"2.5"}},
	{"database-info-not-recorded", "lab-6.4", []string{"2.5"}},
	{"reconcile-duration-as-summary", "lab-6.4", []string{"2.5"}},
	{"reconcile-result-label-renamed", "lab-6.4", []string{"2.5"}},
	// An operator that may not create events records none: 3.7 and 3.8
	// stand behind 3.1's gate and are not judged (skipped, "not run").
	{"no-events-rbac", "lab-6.4", []string{"3.1", "3.7", "3.8"}},
	{"events-rbac-read-only", "lab-6.4", []string{"3.1", "3.7", "3.8"}},
	{"events-rbac-singular-resource", "lab-6.4", []string{"3.1", "3.7", "3.8"}},
	{"no-created-event", "lab-6.4", []string{"3.7"}},
	{"ready-event-as-warning", "lab-6.4", []string{"3.7"}},
	{"ready-event-never-recorded", "lab-6.4", []string{"3.7"}},
	{"recorder-named-after-operator", "lab-6.4", []string{"3.7"}}, // the name is judged once, not again in 3.8
	{"no-deletion-events", "lab-6.4", []string{"3.8"}},
	{"deleted-event-missing", "lab-6.4", []string{"3.8"}},
	{"deleting-event-missing", "lab-6.4", []string{"3.8"}},

	// lab-6.2: the lab's tests (course-unit-tests) with one thing a student
	// leaves out. The tests that fail gate every task behind them.
	{"tests-scaffold-empty-spec", "lab-6.2", []string{"1.1", "2.1", "3.1", "3.2", "4.1", "5.1"}},
	{"test-size-as-quantity", "lab-6.2", []string{"1.1", "2.1", "3.1", "3.2", "4.1", "5.1"}},
	{"test-phase-without-ready", "lab-6.2", []string{"1.1"}},
	{"test-secret-only-if-found", "lab-6.2", []string{"2.1"}},
	{"test-notfound-error-only", "lab-6.2", []string{"3.1"}},
	{"test-finalizer-unchecked", "lab-6.2", []string{"3.2"}},
	{"test-service-not-fetched", "lab-6.2", []string{"4.1"}},
	{"test-secret-spec-pending", "lab-6.2", []string{"2.1"}},
	{"test-service-eventually-true", "lab-6.2", []string{"4.1"}},
	{"test-finalizer-skipped", "lab-6.2", []string{"3.2"}},
	{"test-notfound-result-only", "lab-6.2", []string{"3.1"}},
	// Cheats: specs that tell labctl's runs apart by their environment or
	// their command line, not by what the controller does.
	{"test-fails-on-mutant-variable", "lab-6.2", []string{"1.1", "2.1", "3.1", "3.2", "4.1", "5.1"}},
	{"test-fails-unlike-first-run", "lab-6.2", []string{"1.1", "2.1", "3.1", "3.2", "4.1"}},
	{"test-fails-on-fail-fast", "lab-6.2", []string{"1.1", "2.1", "3.1", "3.2", "4.1"}},
	// Lab 6.1: the suite without the project's CRDs; the scaffold spec
	// failing for the student's own reason, or beside a spec of theirs
	// that fails; coverage.out that is not a profile of the controller.
	{"suite-crds-from-config-crd", "lab-6.1", []string{"4.1"}},
	{"scaffold-spec-size-in-gb", "lab-6.1", []string{"4.1"}},
	{"scaffold-spec-beside-failing-spec", "lab-6.1", []string{"4.1"}},
	{"coverage-of-api-package", "lab-6.1", []string{"4.2"}},
	{"coverage-go-test-output", "lab-6.1", []string{"4.2"}},
	{"coverage-html-report", "lab-6.1", []string{"4.2"}},
	// Lab 6.3: the integration tests against the deployed operator. A
	// client that does not know the Database sends nothing, so its specs
	// fail too (4.1) and gate 2.1; tests that do not wait for what the
	// operator does catch none of its mutants; a wrong expectation fails
	// the run.
	{"integration-scheme-unregistered", "lab-6.3", []string{"1.3", "2.1", "4.1"}},
	{"integration-scheme-registered-elsewhere", "lab-6.3", []string{"1.3", "2.1", "4.1"}},
	{"integration-scale-not-awaited", "lab-6.3", []string{"2.1"}},
	{"integration-delete-not-awaited", "lab-6.3", []string{"2.1"}},
	{"integration-eventually-without-should", "lab-6.3", []string{"2.1"}},
	{"integration-service-not-checked", "lab-6.3", []string{"2.1"}},
	{"integration-secret-name-wrong", "lab-6.3", []string{"2.1", "4.1"}},
	{"integration-expects-other-image", "lab-6.3", []string{"2.1", "4.1"}},
	// An update of a copy read long before conflicts every time: the
	// suite fails however often it runs, and gates 2.1.
	{"integration-stale-update", "lab-6.3", []string{"2.1", "4.1"}},
	{"integration-stale-list-update", "lab-6.3", []string{"2.1", "4.1"}},
	// Fixed names, one never deleted: the first run passes, the others
	// fail whatever the operator does, so the control run fails too.
	{"integration-fixed-name", "lab-6.3", []string{"2.1"}},
	// The workflow, read from the files alone (only its task is run).
	{"workflow-loads-other-image", "lab-6.3", []string{"5.1"}},
	{"workflow-loads-into-default-cluster", "lab-6.3", []string{"5.1"}},
	{"workflow-tests-before-deploy", "lab-6.3", []string{"5.1"}},
}

// fileOnly: mutants whose patch changes only what the given tasks read
// from the project's files; only those tasks are verified.
var fileOnly = map[string][]string{
	"workflow-loads-other-image":          {"5.1"},
	"workflow-loads-into-default-cluster": {"5.1"},
	"workflow-tests-before-deploy":        {"5.1"},
}

// diagnoses: for some mutants, what the headline of a failed task must
// say (the real cause, not a symptom).
var diagnoses = map[string]struct{ task, says string }{
	// Not "never started a controller … set up in cmd/main.go".
	"missing-backups-rbac": {"1.5", "forbid"},
	// Not "the endpoint refused the token" at 2.5: the binding, at 2.1.
	"metrics-reader-bound-to-default": {"2.1", "may not get /metrics"},
	// The registry, not "Reconcile never observed it".
	"metrics-on-default-registry":   {"2.5", "database_reconcile_total is not served (registered with metrics.Registry.MustRegister"},
	"reconcile-duration-as-summary": {"2.5", "database_reconcile_duration_seconds is a summary, not a histogram"},
	"transition-printed":            {"1.3", "comes from the Database controller's reconcile logger"},
	// Which behaviour went untested, not only that a mutant survived.
	"test-secret-only-if-found":       {"2.1", "never creates the Secret"},
	"test-phase-without-ready":        {"1.1", "reports status.ready=true"},
	"test-secret-spec-pending":        {"2.1", "never creates the Secret"},
	"test-service-eventually-true":    {"4.1", "never creates the Service"},
	"test-finalizer-skipped":          {"3.2", "never adds its finalizer"},
	"test-notfound-result-only":       {"3.1", "returns an error when the Database it is asked to reconcile does not exist"},
	"test-fails-on-mutant-variable":   {"5.1", "is not run by a grader's mutant"},
	"test-fails-unlike-first-run":     {"3.2", "when run again beside its mutants"},
	"test-fails-on-fail-fast":         {"3.2", "nothing they check notices it"},
	"integration-scale-not-awaited":   {"2.1", "never scales the StatefulSet"},
	"integration-delete-not-awaited":  {"2.1", "never removes its finalizer"},
	"integration-scheme-unregistered": {"1.3", "does not know the type"},
	"integration-stale-update":        {"4.1", "in all 6 runs the API server refused with a conflict (409) the tests' own update of databases"},
	"integration-stale-list-update":   {"4.1", "in all 6 runs the API server refused with a conflict (409) the tests' own update of databases"},
	"integration-fixed-name":          {"2.1", "then failed when run once more with no mutant alive"},
	// What the API said, not only that a test failed.
	"suite-crds-from-config-crd": {"4.1", "the project's own tests fail"},
	"coverage-go-test-output":    {"4.2", "is not a Go cover profile"},
	"coverage-of-api-package":    {"4.2", "has no statement of github.com/example/postgres-operator/internal/controller"},
}

// warnings: for some mutants and course variants, the tasks that pass with a warning (a bug
// the lab text itself contains: a policy can make it fail).
var warnings = map[string][]string{
	"missing-field-index": {"5.1"},
	// The lab's own marker line: its trailing comment loses patch.
	"course-observability":  {"3.1"},
	"course-scaffold-tests": {"4.1"},
	// The lab's wait for the deletion holds whether the Database is gone
	// or not (2.1), and its workflow waits for a cert-manager nothing
	// installs (5.1).
	"course-integration-tests": {"2.1", "5.1"},
}

// courseVariants are the reference changed to behave as the course's own
// solutions do where they differ from it (testdata/course/*.patch). The
// course's approach must pass every task the lab text asks for; warnings
// are allowed.
var courseVariants = []struct{ name, lab string }{
	{"module3-phase-enum", "lab-3.2"},
	{"always-patch-replicas", "lab-3.3"},
	{"always-patch-replicas", "lab-3.4"},
	{"status-observed-generation-unset", "lab-4.1"},
	{"ready-all-checks-passed", "lab-4.1"},
	{"scaling-waiting-for-replicas", "lab-4.1"},
	{"finalizer-before-deletion-check", "lab-4.2"},
	{"cleanup-one-child-at-a-time", "lab-4.2"}, // any cleanup order
	{"secret-map-func", "lab-4.3"},
	{"requeue-for-visualisation", "lab-4.4"},
	{"polling-simulated-backup", "lab-8.2"},
	// Shapes the lab allows: markers anywhere in the package (B33).
	{"backups-marker-from-backup-controller", "lab-8.2"},
	{"reconcile-in-state-machine-file", "lab-8.2"},
	{"stale-reread-backup", "lab-8.2"},
	// A Backup controller that writes over the status labctl fakes for
	// task 3.2 (that task judges the Database controller).
	{"backup-status-from-jobs", "lab-8.2"},
	// Spellings the checks must read as the same meaning.
	{"printcolumns-spelled-differently", "lab-3.2"},
	{"image-index-own-name", "lab-4.3"},
	{"statefulset-predicate-library", "lab-4.3"},
	{"hello-without-owns-configmap", "lab-2.4"},
	{"hello-without-owns-configmap", "lab-3.1"},
	// The lab's own code: a core recorder, the course's metrics.go, and
	// its events marker whose trailing comment loses patch (3.1 warns).
	{"course-observability", "lab-6.4"},
	// The lab's own tests, calling Reconcile one phase at a time.
	{"course-unit-tests", "lab-6.2"},
	// The scaffold's tests, whose empty spec lab 3.2's validation rejects
	// (the course's mistake: 4.1 warns).
	{"course-scaffold-tests", "lab-6.1"},
	// The course's integration tests in one file, with its optional
	// webhook specs, and its workflow, which waits for a cert-manager
	// nothing installs (5.1 warns).
	{"course-integration-tests", "lab-6.3"},
}

// TestHonesty runs the reference, then every mutant. The subtests are
// dealt out to lanes (lanes_test.go), each a cluster of its own that runs
// one manager at a time (each deploy replaces the previous one); the lanes
// run side by side.
func TestHonesty(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a cluster")
	}
	// Beside TestHonestyOperatorless, whose go test runs take CPU the
	// cluster's verifications leave idle (the suite holds under load).
	t.Parallel()
	// The references run on the first lane, the shared cluster, which
	// the command and metrics subtests use as well.
	first := []subtest{
		{name: "reference", project: project{name: ""}, run: testReference},
		{name: "hello-reference", project: project{name: reference.Hello}, run: func(t *testing.T, c *testcluster.Cluster, op *operator.Operator, dir string) {
			for _, lab := range []string{"lab-2.4", "lab-3.1"} {
				rep := verifyOn(t, c, lab, op, dir)
				require.Empty(t, rep.FailedTasks(), "the Hello World operator must pass every task of %s:\n%s", lab, render(rep))
			}
		}},
		{name: "website-reference", project: project{name: reference.Website}, run: testWebsiteReference},
	}
	var rest []subtest
	for _, v := range courseVariants {
		if !operatorless(v.lab) {
			rest = append(rest, subtest{name: "course/" + v.name + "/" + v.lab, project: variantProject(t, "course", v.name, v.lab), run: func(t *testing.T, c *testcluster.Cluster, op *operator.Operator, dir string) {
				assertCourseVariant(t, v.name, v.lab, verifyOn(t, c, v.lab, op, dir))
			}})
		}
	}
	for _, m := range mutants {
		if !operatorless(m.lab) {
			rest = append(rest, subtest{name: m.name, project: variantProject(t, "mutants", m.name, m.lab), run: func(t *testing.T, c *testcluster.Cluster, op *operator.Operator, dir string) {
				assertMutant(t, m.name, m.lab, m.fails, verifyOn(t, c, m.lab, op, dir, fileOnly[m.name]...))
			}})
		}
	}
	runLanes(t, deal(first, rest, *lanes))
}

// testReference: the reference operator passes every task of the labs it
// builds, through the command too, and verify tells a stale deploy.
func testReference(t *testing.T, c *testcluster.Cluster, op *operator.Operator, dir string) {
	// No waitGarbageCollector here: until the collector syncs the new
	// CRDs, dependents of a deleted Database linger with a dangling
	// controller reference, which the cleanup checks accept as the
	// collector's job. That costs this run a few seconds of waiting,
	// less than waiting for the collector.
	for _, lab := range []string{"lab-3.2", "lab-3.3", "lab-3.4", "lab-4.1", "lab-4.2", "lab-4.3", "lab-4.4", "lab-6.3", "lab-6.4", "lab-8.2"} {
		rep := verifyOn(t, c, lab, op, dir)
		require.Empty(t, rep.FailedTasks(), "the reference operator must pass every task of %s:\n%s", lab, render(rep))
	}
	t.Run("command", testVerifyCommand)
	t.Run("metrics", func(t *testing.T) { testMetricsScraped(t, op) })
	// Sources edited after the deploy: verify warns that the running
	// operator is stale (grade fails it).
	t.Run("stale", func(t *testing.T) {
		main := filepath.Join(dir, "cmd", "main.go")
		f, err := os.OpenFile(main, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("\n// edited after the deploy\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		rep := verifyOn(t, c, "lab-8.2", op, dir, "4.1")
		require.Len(t, rep.Tasks, 1)
		assert.Equal(t, report.Warn, rep.Tasks[0].Status, render(rep))
		assert.Contains(t, render(rep), "older sources")
	})
}

// testWebsiteReference: the Website CRD passes lab 1.4, which needs no
// operator: `labctl verify 1.4` neither looks for one nor fails for want
// of one.
func testWebsiteReference(t *testing.T, c *testcluster.Cluster, _ *operator.Operator, dir string) {
	rep := verifyOn(t, c, "lab-1.4", nil, dir)
	require.Empty(t, rep.FailedTasks(), "the Website CRD must pass every task of lab-1.4:\n%s", render(rep))

	s, out, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{ByName: map[string]cluster.Provider{local.ProviderName: c.Provider}}}
	o := &verifycmd.Options{FindOperator: func(context.Context, *cluster.Cluster, string) (*operator.Operator, error) {
		t.Error("verify looked for an operator for lab 1.4")
		return nil, nil
	}}
	cmd := verifycmd.NewCommand(f, func(ctx context.Context, got *verifycmd.Options) error {
		got.FindOperator = o.FindOperator
		return verifycmd.Run(ctx, got)
	})
	cmd.SetArgs([]string{"1.4", "--project", dir, "--name", c.Name, "--provider", local.ProviderName, "-o", "json"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	require.NoError(t, cmd.Execute(), out.String())
	assert.Contains(t, out.String(), "crd-applied")
}

// TestHonestyOperatorless is TestHonesty for the labs that judge a
// project's files and its own tests (lab 6.2): no operator is built or
// deployed, and it runs beside TestHonesty, in a slot of its own.
func TestHonestyOperatorless(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a cluster")
	}
	t.Parallel()
	// Each judges a project copied into the slot of its stream, after the
	// lanes' pairs of slots.
	type judged struct {
		name string
		run  func(t *testing.T, slot int)
	}
	first := []judged{{"reference", func(t *testing.T, slot int) {
		dir, err := copyInto("", "", slot)
		require.NoError(t, err)
		for _, lab := range operatorlessLabs() {
			studentCommands(t, lab, dir)
			rep := verify(t, lab, nil, dir, judgedTasks(t, lab)...)
			require.Empty(t, rep.FailedTasks(), "the reference operator must pass every task of %s:\n%s", lab, render(rep))
		}
	}}}
	var rest []judged
	for _, v := range courseVariants {
		if operatorless(v.lab) {
			rest = append(rest, judged{"course/" + v.name + "/" + v.lab, func(t *testing.T, slot int) {
				p := variantProject(t, "course", v.name, v.lab)
				dir, err := copyInto(p.name, p.patch, slot)
				require.NoError(t, err)
				studentCommands(t, v.lab, dir)
				assertCourseVariant(t, v.name, v.lab, verify(t, v.lab, nil, dir, judgedTasks(t, v.lab)...))
			}})
		}
	}
	for _, m := range mutants {
		if operatorless(m.lab) {
			rest = append(rest, judged{m.name, func(t *testing.T, slot int) {
				p := variantProject(t, "mutants", m.name, m.lab)
				dir, err := copyInto(p.name, p.patch, slot)
				require.NoError(t, err)
				studentCommands(t, m.lab, dir)
				assertMutant(t, m.name, m.lab, m.fails, verify(t, m.lab, nil, dir, judgedTasks(t, m.lab)...))
			}})
		}
	}
	// The streams side by side: a run of these tests mostly waits (an
	// envtest starting, an Eventually running out against a mutant), so a
	// second stream fills the first's idle time (the reference alone:
	// 181 s of CPU in 250 s).
	var wg sync.WaitGroup
	for i, stream := range deal(first, rest, *operatorlessStreams) {
		slot := 2**lanes + i
		wg.Go(func() {
			for _, j := range stream {
				t.Run(j.name, func(t *testing.T) {
					defer times.add(t, -i, 0, 0, time.Now())
					j.run(t, slot)
				})
			}
		})
	}
	wg.Wait()
	times.write(t)
}

// assertCourseVariant: the course's approach passes every task of its lab
// (warnings allowed), and grade gives it full marks under either credit.
func assertCourseVariant(t *testing.T, name, labID string, rep *report.Report) {
	t.Helper()
	assert.Empty(t, rep.FailedTasks(), "the course's approach (%s) must pass every task of %s:\n%s", name, labID, render(rep))
	assertWarnings(t, name, rep)
	lab := loadLab(t, labID)
	for _, credit := range grade.Credits {
		tasks, total := grade.Score(lab, rep, credit)
		assert.Equal(t, float64(rep.Summary.MaxPoints), total, "the course's approach (%s) must get full marks in grade (--credit %s): %+v", name, credit, tasks)
	}
}

// assertMutant: the mutant fails exactly its tasks, for the reason its
// diagnosis says.
func assertMutant(t *testing.T, name, labID string, fails []string, rep *report.Report) {
	t.Helper()
	want := slices.Sorted(slices.Values(fails))
	got := slices.Sorted(slices.Values(rep.FailedTasks()))
	assert.Equal(t, want, got, "mutant %s must fail exactly these tasks of %s:\n%s", name, labID, render(rep))
	assertWarnings(t, name, rep)
	if d, ok := diagnoses[name]; ok {
		for _, task := range rep.Tasks {
			if task.ID == d.task {
				h := task.Headline()
				require.NotNil(t, h, "task %s of mutant %s has no failed check", d.task, name)
				assert.Contains(t, h.Message, d.says, "the reason task %s fails against mutant %s", d.task, name)
			}
		}
	}
}

// assertWarnings checks that the tasks warnings lists for a mutant or a
// course variant pass with a warning.
func assertWarnings(t *testing.T, name string, rep *report.Report) {
	t.Helper()
	for _, id := range warnings[name] {
		for _, task := range rep.Tasks {
			if task.ID == id {
				assert.Equal(t, report.Warn, task.Status, "task %s of %s warns:\n%s", id, name, render(rep))
			}
		}
	}
}

// projectOf is the reference project a lab builds on.
func projectOf(t testing.TB, labID string) string {
	t.Helper()
	return loadLab(t, labID).Project
}

// allLabs are labctl's labs, read once.
var allLabs = sync.OnceValues(func() ([]*labs.Lab, error) { return labs.Load(labsfs.FS) })

// operatorless: the lab judges a project's files and its own tests, not
// a running operator (labs.Lab.Operatorless).
func operatorless(lab string) bool {
	all, err := allLabs()
	if err != nil {
		panic(err)
	}
	l, ok := labs.Find(all, lab)
	return ok && l.Operatorless
}

// operatorlessLabs are the labs operatorless says so of.
func operatorlessLabs() []string {
	all, err := allLabs()
	if err != nil {
		panic(err)
	}
	var out []string
	for _, l := range all {
		if l.Operatorless {
			out = append(out, l.ID)
		}
	}
	return out
}

// variantProject is the project of a course variant or a mutant (kind:
// the testdata folder).
func variantProject(t testing.TB, kind, name, lab string) project {
	return project{name: projectOf(t, lab), patch: filepath.Join("testdata", kind, name+".patch"), operatorless: operatorless(lab)}
}

// deployIfOperator deploys the project on c when it has an operator (lab
// 1.4's CRD has none: nil) and its lab needs it running.
func deployIfOperator(t testing.TB, c *testcluster.Cluster, p project, dir string) *operator.Operator {
	t.Helper()
	ref, err := reference.Lookup(p.name)
	require.NoError(t, err)
	if !ref.Operator || p.operatorless {
		return nil
	}
	return deployOn(t, c, dir)
}

// TestMutantTable checks the table against testdata and the labs: every
// patch is in the table, and every task of every lab is failed by at least
// one mutant.
func TestMutantTable(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "mutants", "*.patch"))
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".patch"))
	}
	var table []string
	covered := map[string]bool{}
	for _, m := range mutants {
		table = append(table, m.name)
		for _, task := range m.fails {
			covered[m.lab+" "+task] = true
		}
	}
	assert.ElementsMatch(t, names, table, "testdata/mutants and the table differ")
	all, err := allLabs()
	require.NoError(t, err)
	for _, l := range all {
		machine := checks.MachineTasks(l)
		for _, task := range l.Tasks {
			if slices.Contains(machine, task.ID) {
				continue // checks.TestTool
			}
			assert.True(t, covered[l.ID+" "+task.ID], "no mutant fails task %s of %s", task.ID, l.ID)
		}
	}
}

// testVerifyCommand runs `labctl verify` itself against the running
// reference: it finds the cluster and the operator, filters tasks, writes
// JSON, and exits 3 when a task fails.
func testVerifyCommand(t *testing.T) {
	run := func(args ...string) (string, error) {
		s, out, _ := iostreams.Test(false)
		f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{ByName: map[string]cluster.Provider{local.ProviderName: env.Provider}}}
		cmd := verifycmd.NewCommand(f, nil)
		cmd.SetArgs(append([]string{"--name", env.Name, "--provider", local.ProviderName}, args...))
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run("8.2", "--task", "3.1,4.3", "-o", "json", "--lang", "ru")
	require.NoError(t, err, out)
	var rep report.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Tasks, 2)
	assert.Equal(t, "3.1", rep.Tasks[0].ID)
	assert.Equal(t, "Контроллер Backup ставит условие BackupReady", rep.Tasks[0].Title)
	assert.Equal(t, report.Pass, rep.Status)
	assert.Contains(t, rep.Namespace, "labctl-lab-8-2-")

	course, err := filepath.Abs(filepath.Join("..", "testdata", "course"))
	require.NoError(t, err)
	// The course's own lookup without an index (B3, verbatim in the lab
	// text) warns, with the evidence; `grade --policy` can fail it.
	out, err = run("lab-3.4", "--task", "5.1", "--project", course)
	require.NoError(t, err, out)
	assert.Contains(t, out, "! 5.1")
	assert.Contains(t, out, "findDatabasesByOwner")

	// A Hello World lab against the Database operator says what to run.
	s, _, errOut := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{ByName: map[string]cluster.Provider{local.ProviderName: env.Provider}}}
	cmd := verifycmd.NewCommand(f, nil)
	cmd.SetArgs([]string{"2.4", "--task", "1.2", "--name", env.Name, "--provider", local.ProviderName})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err = cmd.Execute()
	assert.Equal(t, userr.ExitChecks, userr.Code(err))
	assert.Contains(t, errOut.String(), "the operator running is postgres-operator, but lab-2.4 builds on hello-world-operator: run `labctl up --lab lab-2.4`")
}

// judgedTasks are the tasks of a lab the honesty suite verifies: all but
// its checks.MachineTasks, since what this machine happens to have
// installed says nothing of labctl's checks (checks.TestTool tests those;
// nil: every task).
func judgedTasks(t testing.TB, labID string) []string {
	lab := loadLab(t, labID)
	machine := checks.MachineTasks(lab)
	if len(machine) == 0 {
		return nil
	}
	var out []string
	for _, task := range lab.Tasks {
		if !slices.Contains(machine, task.ID) {
			out = append(out, task.ID)
		}
	}
	return out
}

// studentCommands runs in a project what a lab's text has the student run
// to leave a file behind, unless the project already has that file (a
// mutant's wrong one). Lab 6.1 writes coverage.out; -run '^$' leaves the
// specs to the go-test step, which runs them anyway.
func studentCommands(t testing.TB, labID, dir string) {
	t.Helper()
	if labID != "lab-6.1" {
		return
	}
	if _, err := os.Stat(filepath.Join(dir, "coverage.out")); err == nil {
		return
	}
	cmd := exec.Command("go", "test", "-count=1", "-run", "^$", "-coverprofile=coverage.out", "./internal/controller/...")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test -coverprofile=coverage.out in %s: %s", dir, out)
}
