// Package checks verifies a lab against a live cluster and the operator
// running in it: it runs the lab's scenarios (internal/labs) in a fresh
// namespace, observing through watches, and turns every assertion into a
// result with evidence. Generic steps (apply, patch, delete, expect) come
// from the YAML; what YAML cannot say is a check written in Go, registered
// by name (audit, rbac, schema, source, build, operator health) and
// parameterised from the YAML.
package checks

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/report"
)

// LabLabel names the lab of a run's namespace (kube.ManagedByLabel marks
// it as labctl's).
const (
	LabLabel = "labctl.io/lab"
	// FieldManager owns what verify applies.
	FieldManager = "labctl-verify"
)

// Options are the inputs of Run.
type Options struct {
	Lab     *labs.Lab
	Cluster *cluster.Cluster
	// Operator is the operator under test; nil when none was found (checks
	// that need it are skipped, and scenarios will observe nothing).
	Operator *operator.Operator
	// ProjectDir is the operator's source (kubebuilder project) for source
	// and build checks; "" skips them.
	ProjectDir string
	// Lang is "en" or "ru".
	Lang string
	// Tasks limits the run to these task IDs (and the scenarios that give
	// evidence for them).
	Tasks []string
	// Keep leaves the namespace and its objects for inspection.
	Keep bool
	// Profile chooses timeouts: labs.ProfileLocal or labs.ProfileKind;
	// "" decides from the cluster (simulated pods: local).
	Profile string
	// Namespace overrides the generated namespace name (tests).
	Namespace string
	// OnCheck is called as each check finishes (progress display); calls
	// never overlap.
	OnCheck func(*report.CheckResult)
	// Grading is set by `labctl grade`: what verify only warns about a
	// student's setup (an operator older than its sources) fails there.
	Grading bool
	// CleanupTimeout bounds the cleanup (default 30s).
	CleanupTimeout time.Duration
	// Go runs the build check's go command; nil runs the go on PATH here,
	// as the user (verify: the student's own project). Grading runs it in
	// the submission's box (deploy.BoxedGo): compiling every package of
	// a submission runs its cgo and assembler files, which read whatever
	// they #include.
	Go GoRunner
}

// GoRunner runs a go command at low priority and returns what it wrote
// on stderr. An error that is (or wraps) an *exec.ExitError means go ran
// and failed; any other error means it could not run.
type GoRunner = gobuild.Runner

// Run verifies a lab and returns the report. An error means the run could
// not happen at all (no cluster, bad lab); failed checks are in the report.
// Its phases: complete the options, newRun, newReport, prepareNamespace,
// runScenarios, leaveNamespace, tasks.
func Run(ctx context.Context, o Options) (*report.Report, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	r, err := newRun(ctx, o)
	if err != nil {
		return nil, err
	}
	defer r.removeScratch()
	rep := r.newReport()
	scenarios := r.selectScenarios()
	needsNamespace := slices.ContainsFunc(scenarios, scenarioNeedsNamespace)
	if needsNamespace {
		if err := r.prepareNamespace(ctx, rep); err != nil {
			return nil, err
		}
	}
	actx, stopFollowing := context.WithCancel(ctx)
	if needsNamespace {
		r.startActivity(actx)
	}
	results := r.runScenarios(ctx, scenarios)
	stopFollowing()
	if needsNamespace {
		r.leaveNamespace(ctx, rep)
	}
	rep.Tasks = r.tasks(results)
	rep.Duration = report.Duration(time.Since(rep.Started))
	rep.Finish()
	return rep, nil
}

// complete validates the options and fills in the defaults.
func (o *Options) complete() error {
	if o.Lab == nil || o.Cluster == nil || o.Cluster.Config == nil {
		return errors.New("checks.Run needs a lab and a cluster")
	}
	if err := Validate(o.Lab); err != nil {
		return err
	}
	if o.Lang == "" {
		o.Lang = "en"
	}
	if o.Profile == "" {
		o.Profile = labs.ProfileLocal
		if o.Cluster.Env.RealPods {
			o.Profile = labs.ProfileKind
		}
	}
	for _, t := range o.Tasks {
		if _, ok := o.Lab.Task(t); !ok {
			return fmt.Errorf("lab %s has no task %s", o.Lab.ID, t)
		}
	}
	return nil
}

// newReport is the report's header, started now.
func (r *run) newReport() *report.Report {
	o := r.o
	rep := &report.Report{
		Lab:      o.Lab.ID,
		Title:    o.Lab.Title.In(o.Lang),
		Lang:     o.Lang,
		Cluster:  o.Cluster.Name,
		Provider: o.Cluster.Provider,
		Project:  o.ProjectDir,
		Started:  time.Now(),
	}
	if o.Operator != nil {
		rep.Operator = o.Operator.Identity
		rep.OperatorProject, rep.OperatorDir = o.Operator.ProjectName, o.Operator.ProjectDir
	}
	return rep
}

// prepareNamespace creates the run's namespace and measures how fast the
// cluster writes (the waits stretch by it).
func (r *run) prepareNamespace(ctx context.Context, rep *report.Report) error {
	if err := r.createNamespace(ctx); err != nil {
		return err
	}
	rep.Namespace = r.ns
	if note := r.calibrate(ctx); note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	rep.WriteLatency = report.Duration(r.writeRTT)
	return nil
}

// runScenarios runs the scenarios in their order: the ordinary ones side by
// side, then those that must run alone, then the lab's cleanup (not with
// --keep), then the final ones (e.g. the operator's health over the whole
// run). It returns the checks by ID.
func (r *run) runScenarios(ctx context.Context, scenarios []*labs.Scenario) map[string]*report.CheckResult {
	results := map[string]*report.CheckResult{}
	var mu sync.Mutex
	collect := func(c *report.CheckResult) {
		mu.Lock()
		defer mu.Unlock()
		results[c.ID] = c
		if r.o.OnCheck != nil {
			r.o.OnCheck(c)
		}
	}
	var wg sync.WaitGroup
	for _, sc := range scenarios {
		if sc.Final || sc.Cleanup || sc.Alone {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.runScenario(ctx, sc, collect)
		}()
	}
	wg.Wait()
	for _, sc := range scenarios {
		if sc.Alone && !sc.Final && !sc.Cleanup {
			r.runScenario(ctx, sc, collect)
		}
	}
	for _, sc := range scenarios {
		switch {
		case !sc.Cleanup:
		case r.o.Keep:
			for _, st := range sc.Steps {
				if st.IsAssertion() {
					c := r.toCheck(ctx, &st, skip("not run: --keep leaves the objects for inspection, so the lab's cleanup was skipped"))
					c.Scenario = sc.Name
					collect(c)
				}
			}
		default:
			r.runScenario(ctx, sc, collect)
		}
	}
	for _, sc := range scenarios {
		if sc.Final && !sc.Cleanup {
			r.runScenario(ctx, sc, collect)
		}
	}
	return results
}

// leaveNamespace deletes the run's namespace, or keeps it with --keep.
func (r *run) leaveNamespace(ctx context.Context, rep *report.Report) {
	if r.o.Keep {
		rep.Notes = append(rep.Notes, fmt.Sprintf("kept namespace %s and its objects (--keep)", r.ns))
		return
	}
	rep.Notes = append(rep.Notes, r.cleanup(ctx)...)
}

// tasks groups the checks by the lab's tasks (those asked for), in the
// lab's order.
func (r *run) tasks(results map[string]*report.CheckResult) []*report.Task {
	o := r.o
	var out []*report.Task
	for _, t := range o.Lab.Tasks {
		if len(o.Tasks) > 0 && !slices.Contains(o.Tasks, t.ID) {
			continue
		}
		rt := &report.Task{ID: t.ID, Title: t.Title.In(o.Lang), Hint: t.Hint.In(o.Lang), Points: t.Points, Hidden: t.Hidden}
		for _, sc := range o.Lab.Scenarios {
			for _, st := range sc.Steps {
				if st.IsAssertion() && slices.Contains(st.Tasks, t.ID) {
					if c, ok := results[st.ID]; ok {
						rt.Checks = append(rt.Checks, c)
					}
				}
			}
		}
		out = append(out, rt)
	}
	return out
}

// run is the state one verification shares across its scenarios.
type run struct {
	o       Options
	lab     *labs.Lab
	profile string
	cfg     *rest.Config
	client  client.Client
	dyn     dynamic.Interface
	ns      string
	started time.Time

	logOffset       int
	restartsAtStart int
	auditOffset     int64

	mu      sync.Mutex
	created []objectKey // in creation order, for cleanup in reverse
	// held are objects a step gave finalizers of labctl's own (to hold a
	// child while a cleanup cannot finish); cleanup lets them go even when
	// the scenario stopped before its own step did.
	held []objectKey

	forbid forbiddenCache
	// stretch scales the lab's timeouts for a slow cluster (calibrate),
	// measured from writeRTT.
	stretch  float64
	writeRTT time.Duration
	// activity follows what the operator works on in the namespace, for
	// the waits (nil: plain waits).
	activity *activity

	projOnce sync.Once
	proj     *goProject
	projErr  error

	memoMu sync.Mutex
	memo   map[string]*memoEntry
	// scratch are directories that live as long as the run (test
	// binaries several steps run).
	scratch []string
	// atEnd undo what steps did outside the run's namespace (a Role in the
	// namespace the project's tests use): cleanup calls them first.
	atEnd []func(context.Context) []string
}

type objectKey struct {
	GVR  schema.GroupVersionResource
	GVK  schema.GroupVersionKind
	Name string
}

func newRun(ctx context.Context, o Options) (*run, error) {
	cfg := rest.CopyConfig(o.Cluster.Config)
	// A verification sends bursts (patches in quick succession, a writer
	// provoking conflicts): do not let client-side throttling blur them.
	cfg.QPS, cfg.Burst = 200, 400
	cl, err := kube.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to cluster %s: %w", o.Cluster.Name, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	r := &run{o: o, lab: o.Lab, profile: o.Profile, cfg: cfg, client: cl, dyn: dyn, started: time.Now()}
	if op := o.Operator; op != nil {
		if op.Logs != nil {
			if b, err := op.Logs(ctx); err == nil {
				r.logOffset = len(b)
			}
		}
		if op.Restarts != nil {
			r.restartsAtStart, _ = op.Restarts(ctx)
		}
	}
	r.auditOffset = auditSize(ctx, o.Cluster.Env)
	return r, nil
}

// selectScenarios returns the scenarios that give evidence for the
// selected tasks (all of them without a filter).
func (r *run) selectScenarios() []*labs.Scenario { return selectScenarios(r.lab, r.o.Tasks) }

func selectScenarios(lab *labs.Lab, tasks []string) []*labs.Scenario {
	var out []*labs.Scenario
	for i := range lab.Scenarios {
		sc := &lab.Scenarios[i]
		if len(tasks) == 0 {
			out = append(out, sc)
			continue
		}
		for _, st := range sc.Steps {
			if st.IsAssertion() && slices.ContainsFunc(st.Tasks, func(t string) bool { return slices.Contains(tasks, t) }) {
				out = append(out, sc)
				break
			}
		}
	}
	return out
}

// CountChecks is how many checks a run of these tasks (all: none given)
// reports through Options.OnCheck.
func CountChecks(lab *labs.Lab, tasks []string) int {
	n := 0
	for _, sc := range selectScenarios(lab, tasks) {
		for _, st := range sc.Steps {
			if st.IsAssertion() {
				n++
			}
		}
	}
	return n
}

// scenarioNeedsNamespace: scenarios made only of checks that read (source,
// schema, build) need no namespace.
func scenarioNeedsNamespace(sc *labs.Scenario) bool {
	if len(sc.Record) > 0 {
		return true
	}
	for _, st := range sc.Steps {
		if st.Check == nil {
			return true
		}
		if def, ok := registry[st.Check.Name]; ok && def.Namespaced {
			return true
		}
	}
	return false
}

var nsUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// NamespaceName returns a fresh name for a run's namespace:
// labctl-<lab>-<random>. Callers that must find the namespace again after
// a crash (verify) choose it up front and pass it as Options.Namespace.
func NamespaceName(labID string) string {
	return kube.NamespacePrefix + nsUnsafe.ReplaceAllString(strings.ToLower(labID), "-") + "-" + randomSuffix(5)
}

func (r *run) createNamespace(ctx context.Context) error {
	name := r.o.Namespace
	if name == "" {
		name = NamespaceName(r.lab.ID)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{kube.ManagedByLabel: kube.ManagedByValue, LabLabel: r.lab.ID},
	}}
	if err := r.client.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	r.ns = name
	return nil
}

func randomSuffix(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Hour)
}

// gvr maps a lab kind to its resource through the cluster's discovery.
func (r *run) gvr(kind string) (schema.GroupVersionKind, schema.GroupVersionResource, bool, error) {
	gvk, err := r.lab.ResolveKind(kind)
	if err != nil {
		return gvk, schema.GroupVersionResource{}, false, err
	}
	m, err := r.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return gvk, schema.GroupVersionResource{}, false, fmt.Errorf("the cluster does not serve %s (is its CRD installed?)", gvk.GroupKind())
		}
		return gvk, schema.GroupVersionResource{}, false, err
	}
	return gvk, m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func ptrTo[T any](v T) *T { return &v }

// oneLine flattens an error for a one-line message.
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return report.CleanLine(err.Error())
}
