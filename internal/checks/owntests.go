package checks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/testmutant"
)

func init() {
	Register(Typed(Definition{
		Name: "go-test",
		Doc:  "the project's own tests pass (go test, with labctl's kube-apiserver and etcd as the envtest binaries); the specs that ran and the coverage are reported",
	}, runGoTest))
	Register(Typed(Definition{
		Name: "tests-catch",
		Doc:  "the project's own tests fail on mutants of its controller (the Secret never created, the finalizer never added, ...): tests that pass whatever the controller does test nothing",
	}, runTestsCatch))
}

type goTestParams struct {
	// Packages are go test's package patterns (default ./...).
	Packages []string `json:"packages,omitempty"`
}

func (p *goTestParams) Validate() error { return nil }

func (p *goTestParams) packages() []string {
	if len(p.Packages) == 0 {
		return []string{"./..."}
	}
	return p.Packages
}

type testsCatchParams struct {
	goTestParams
	// Controller is the directory of the controller package, relative to
	// the project (default internal/controller).
	Controller string `json:"controller,omitempty"`
	// Reconciler is the reconciler's type (default DatabaseReconciler).
	Reconciler string `json:"reconciler,omitempty"`
	// Mutants must each make a test fail (testmutant.Catalogue).
	Mutants []string `json:"mutants"`
}

func (p *testsCatchParams) Validate() error {
	if len(p.Mutants) == 0 {
		return errors.New("needs mutants")
	}
	for _, m := range p.Mutants {
		if _, ok := testmutant.Lookup(m); !ok {
			return fmt.Errorf("unknown mutant %q", m)
		}
	}
	return nil
}

// errNoAssets: labctl's kube-apiserver and etcd are not installed.
var errNoAssets = errors.New("no envtest binaries")

// testLimit is how long the project's tests may take: the check's
// timeout, within ctx's deadline.
func testLimit(ctx context.Context, c *Context) time.Duration {
	limit := c.Timeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < limit {
		limit = time.Until(dl)
	}
	return limit
}

// testEnv is the tests' environment: labctl's control plane as envtest's
// binaries, and the mutant alive ("" for none).
// testEnv is the environment of a test run: mutant is the entry that
// chooses the mutant alive (testmutant: set in every run, the project's
// own ones too).
func testEnv(assets, mutant string) []string {
	// envtest gives its API server 20 s to start unless told otherwise; a
	// loaded machine (a grader's, two suites at once) needs longer, and a
	// verdict must not depend on the load. The check's timeout still bounds it.
	return []string{"KUBEBUILDER_ASSETS=" + assets, "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT=3m", mutant}
}

// testRunError says why go could not run the tests (nil when it ran,
// passing or failing).
func testRunError(ctx context.Context, err error, limit time.Duration) error {
	var exit *exec.ExitError
	switch {
	case err == nil || errors.Is(err, errNoGo):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("the tests did not finish within %s", roundDur(limit))
	case !errors.As(err, &exit):
		return fmt.Errorf("cannot run go test: %v", oneLine(err))
	}
	return nil
}

// goTest runs the project's tests with go test -json -cover within the
// check's timeout and reads what they did. The envtest binaries are
// labctl's control plane (KUBEBUILDER_ASSETS), shared read-only with a
// sandbox.
func goTest(ctx context.Context, c *Context, pkgs []string) (*gobuild.TestRun, error) {
	bins := controlplane.Installed()
	if bins == nil {
		return nil, errNoAssets
	}
	limit := testLimit(ctx, c)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// go test's own -timeout ends a hung test binary with the stacks of
	// its goroutines, a little before the check's deadline ends go.
	args := append([]string{"test", "-json", "-count=1", "-p=1", "-cover", "-timeout=" + (limit - limit/10).Round(time.Second).String()}, pkgs...)
	assets, err := envtestAssets(bins.Dir)
	if err != nil {
		return nil, fmt.Errorf("preparing the envtest binaries: %w", err)
	}
	defer os.RemoveAll(assets)
	var stdout bytes.Buffer
	stderr, err := c.goRunner()(ctx, gobuild.Command{Dir: c.ProjectDir(), Args: args, Env: testEnv(assets, testmutant.OffEnv()), Read: []string{bins.Dir, assets}, Stdout: &stdout})
	if err := testRunError(ctx, err, limit); err != nil {
		return nil, err
	}
	run := gobuild.ParseTestEvents(stdout.Bytes())
	if run.BuildOutput == "" {
		run.BuildOutput = stderr
	}
	if err != nil && !run.Ran() && len(run.BuildFailed) == 0 {
		// go stopped before any test (a pattern that matches nothing, a
		// go.mod it refuses): its own words say why.
		run.BuildFailed = []string{strings.Join(pkgs, " ")}
		run.BuildOutput = stderr
	}
	return run, nil
}

// goRunner runs the check's go commands: in the submission's box when
// grading, else here.
func (c *Context) goRunner() GoRunner {
	if c.run.o.Go != nil {
		return c.run.o.Go
	}
	return goHere
}

// apiserverWrapper starts labctl's kube-apiserver where envtest would.
// In a network namespace with no default route (a grading box has only
// its loopback) the API server finds no address to advertise and exits;
// envtest gives it none, the student's suite cannot be asked to, so the
// wrapper does: the loopback, with no endpoint reconciler (which refuses
// a loopback address). With a default route it adds nothing (the kernel's
// unreachable IPv6 default on lo is none).
const apiserverWrapper = `#!/bin/sh
# labctl: kube-apiserver for envtest (see labctl's checks/owntests.go)
if grep -q "^[^[:space:]]*[[:space:]]00000000[[:space:]]" /proc/net/route 2>/dev/null || grep "^00000000000000000000000000000000 00 " /proc/net/ipv6_route 2>/dev/null | grep -vq "[[:space:]]lo$"; then
	exec "%[1]s" "$@"
fi
exec "%[1]s" --advertise-address=127.0.0.1 --endpoint-reconciler-type=none "$@"
`

// envtestAssets makes a KUBEBUILDER_ASSETS directory: labctl's binaries,
// kube-apiserver through apiserverWrapper. Anyone may read it (a box's
// user runs the tests). The caller removes it.
func envtestAssets(bin string) (string, error) {
	dir, err := os.MkdirTemp("", "labctl-envtest-")
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(bin)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	for _, e := range entries {
		if err != nil {
			break
		}
		real := filepath.Join(bin, e.Name())
		if e.Name() == "kube-apiserver" {
			err = os.WriteFile(filepath.Join(dir, e.Name()), fmt.Appendf(nil, apiserverWrapper, real), 0o755)
			continue
		}
		err = os.Symlink(real, filepath.Join(dir, e.Name()))
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

func testsUnavailable(err error) Outcome {
	switch {
	case errors.Is(err, errNoAssets):
		return skip("labctl's kube-apiserver and etcd (the envtest binaries) are not installed here: run `labctl up --provider local` once, or set KUBEBUILDER_ASSETS")
	case errors.Is(err, errNoGo):
		return skip("the Go toolchain is not installed, so the project's tests cannot run here")
	}
	return errorf("running the project's tests: %v", oneLine(err))
}

func runGoTest(ctx context.Context, c *Context, p *goTestParams) Outcome {
	if c.ProjectDir() == "" {
		return skip("no project directory whose tests could run (pass --project DIR)")
	}
	pkgs := p.packages()
	expected := "go test " + strings.Join(pkgs, " ") + " passes, with at least one test"
	start := time.Now()
	b := c.run.once("go-test "+c.ProjectDir()+" "+strings.Join(pkgs, " "), func() any {
		run, err := goTest(ctx, c, pkgs)
		return baselineRun{run, err}
	}).(baselineRun)
	run, err := b.run, b.err
	if err != nil {
		return testsUnavailable(err)
	}
	if len(run.BuildFailed) > 0 {
		out := fail("the tests do not compile: %s", gobuild.FirstErrors(run.BuildOutput, 3))
		out.Expected, out.Observed = expected, logline.Cut(report.Clean(run.BuildOutput), 1500)
		return out
	}
	if len(run.Failed) > 0 {
		return testsFailed(run, expected)
	}
	if !run.Ran() {
		out := fail("go test %s runs no test: write them in *_test.go files of those packages", strings.Join(pkgs, " "))
		out.Expected = expected
		return out
	}
	msg := fmt.Sprintf("%d test(s) passed", len(run.Passed))
	if run.Specs > 0 {
		msg = fmt.Sprintf("%d Ginkgo spec(s) in %d test(s) passed", run.Specs, len(run.Passed))
	}
	if run.Coverage >= 0 {
		msg += fmt.Sprintf(", coverage %.1f%% of statements", run.Coverage)
	}
	return pass("%s (%s)", msg, roundDur(time.Since(start)))
}

var (
	failureLine = regexp.MustCompile(`(?i)\[FAILED\]|\berror\b|unable to|panic|expected|timeout|timed out`)
	// Go stack frames and the files they are in, which Ginkgo and zap print
	// under an error.
	stackLine = regexp.MustCompile(`^(\S+\.go:\d+|[\w./*()-]+\.\w+\(.*\)?)$|^\S+@v[\w.-]+/`)
)

// testsFailed says which tests (or specs) failed, with their first lines.
func testsFailed(run *gobuild.TestRun, expected string) Outcome {
	what := strings.Join(run.Failed, ", ")
	if len(run.FailedSpecs) > 0 {
		what = strings.Join(run.FailedSpecs, "; ")
	}
	// The lines that say what went wrong first (an assertion's [FAILED],
	// envtest's "unable to start the control plane" and its cause), then
	// the rest, within the evidence's length.
	var lines, rest []string
	for _, name := range run.Failed {
		for _, l := range run.Output[name] {
			t := strings.TrimSpace(l)
			switch {
			case t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") || stackLine.MatchString(t):
			case failureLine.MatchString(t):
				lines = append(lines, t)
			default:
				rest = append(rest, t)
			}
		}
	}
	lines = append(lines, rest...)
	out := fail("the project's own tests fail: %s", logline.Cut(what, 400))
	out.Expected = expected
	out.Observed = logline.Cut(report.Clean(strings.Join(lines, "\n")), 1500)
	return out
}

func runTestsCatch(ctx context.Context, c *Context, p *testsCatchParams) Outcome {
	dir := c.ProjectDir()
	if dir == "" {
		return skip("no project directory whose tests could run (pass --project DIR)")
	}
	// The step's timeout bounds every run it makes together.
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	rel := p.Controller
	if rel == "" {
		rel = filepath.Join("internal", "controller")
	}
	reconciler := p.Reconciler
	if reconciler == "" {
		reconciler = "DatabaseReconciler"
	}
	pkgs := p.packages()
	build := buildMutants(ctx, c, pkgs, rel, reconciler)
	switch {
	case build.skip != "":
		return skip("%s", build.skip)
	case build.err != nil:
		return testsUnavailable(build.err)
	case build.failed != nil:
		// labctl's wrappers did not fit the project (a Create of some
		// other type), or the tests do not compile at all (go-test says
		// so): nothing this step can judge.
		return skip("the tests do not compile with labctl's mutants of %s (%s), so whether they catch them cannot be told", rel, gobuild.FirstErrors(build.failed.BuildOutput, 1))
	case len(build.bins) == 0:
		return skip("go test %s has no package with tests", strings.Join(pkgs, " "))
	}
	var mutants []testmutant.Mutant
	for _, name := range p.Mutants {
		m, _ := testmutant.Lookup(name)
		if m.NeedsReconcile && !build.in.Reconcile {
			return skip("labctl found no Reconcile method of %s in %s, so it cannot make the mutant that %s", reconciler, rel, m.Doc)
		}
		mutants = append(mutants, m)
	}
	expected := "go test " + strings.Join(pkgs, " ") + " fails on each mutant, in a test that passes on the project's own controller"
	// What fails on the student's own controller says nothing about a
	// mutant (the course's scaffold test, a flaky spec): a mutant is caught
	// by a test that passed at baseline and fails with it. When the go-test
	// step already ran these tests and all passed, that is the baseline;
	// otherwise the instrumented build runs with no mutant alive.
	pkgKey := dir + " " + strings.Join(pkgs, " ")
	var baseFailed []string
	v, ok := c.run.recall("go-test " + pkgKey)
	failFast := ok && v.(baselineRun).clean()
	if !failFast {
		base := c.run.once("tests-catch baseline "+pkgKey+" "+rel+" "+reconciler, func() any {
			run, err := build.run(ctx, c, "", false)
			return baselineRun{run, err}
		}).(baselineRun)
		switch {
		case base.err != nil:
			return testsUnavailable(base.err)
		case len(base.run.Passed) == 0:
			return skip("no test of go test %s passes on the project's own controller, so whether they catch a mutant cannot be told", strings.Join(pkgs, " "))
		}
		baseFailed = failedNames(base.run)
	}
	// Beside the mutants, in an order chosen afresh, a control: the same
	// build with no mutant alive. A test that fails in it fails whatever
	// the controller does (it changes from run to run, or it looks at its
	// run rather than at the controller), so its failing tells no mutant
	// apart: it is left out of what catches one, and the step is judged on
	// the tests that held. The control runs every test (no fail-fast), so
	// all of those are known. One control serves every step of a
	// verification that tests the same build: the first such step runs it
	// among its mutants, the others read it (a run is the costly part of
	// the lab). Two runs at a time: a run is mostly one process (envtest's
	// kube-apiserver, then the suite) and the machine has two cores.
	const control = ""
	shared, ours := c.run.control("tests-catch control " + pkgKey + " " + rel + " " + reconciler)
	batch := slices.Clone(p.Mutants)
	if ours {
		defer shared.settle()
		batch = append(batch, control)
	} else if _, ok := shared.wait(); !ok {
		// The step that ran it could not: this one runs its own.
		batch = append(batch, control)
	}
	rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	runs := map[string]baselineRun{}
	var mu sync.Mutex
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, name := range batch {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			run, err := build.run(ctx, c, name, failFast && name != control)
			mu.Lock()
			runs[name] = baselineRun{run, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	// A run that ran no test at all (its suite could not set up: envtest
	// slow to start on a loaded machine) says nothing of its mutant: it
	// runs once more, alone.
	for _, name := range batch {
		if r := runs[name]; r.err == nil && !r.run.Ran() {
			run, err := build.run(ctx, c, name, failFast && name != control)
			runs[name] = baselineRun{run, err}
		}
	}
	ctl, ran := runs[control]
	if !ran {
		ctl, _ = shared.wait()
	} else if ours && ctl.err == nil && ctl.run.Ran() {
		shared.keep(ctl)
	}
	if ctl.err != nil {
		return testsUnavailable(ctl.err)
	}
	unsteady := slices.DeleteFunc(slices.Clone(failedNames(ctl.run)), func(n string) bool { return slices.Contains(baseFailed, n) })
	// held: the tests a mutant failed that passed both at baseline and in
	// the control.
	held := func(run *gobuild.TestRun) []string {
		return slices.DeleteFunc(slices.Clone(failedNames(run)), func(n string) bool {
			return slices.Contains(baseFailed, n) || slices.Contains(unsteady, n)
		})
	}
	// survived: mutants no test noticed; masked: mutants only unsteady
	// tests failed with.
	var survived, masked []string
	caught := 0
	for _, m := range mutants {
		r := runs[m.Name]
		if r.err == nil && failFast && len(unsteady) > 0 && len(held(r.run)) == 0 && len(failedNames(r.run)) > 0 {
			// It stopped at a test the control failed too: what the
			// tests after it say about the mutant is still unknown.
			run, err := build.run(ctx, c, m.Name, false)
			r = baselineRun{run, err}
		}
		if r.err != nil {
			return testsUnavailable(r.err)
		}
		// Caught: a test that held fails, and the mutant did change what
		// the controller did.
		if len(held(r.run)) > 0 && fired(r.run, m.Name) {
			caught++
			continue
		}
		if !r.run.Ran() {
			return skip("go test %s runs no test with labctl's mutant %s", strings.Join(pkgs, " "), m.Name)
		}
		s := "a controller that " + m.Doc
		switch {
		case !fired(r.run, m.Name):
			s += " (the tests never made it do that)"
		case len(failedNames(r.run)) > len(baseFailedIn(r.run, baseFailed)):
			masked = append(masked, s)
			continue
		}
		survived = append(survived, s)
	}
	if len(survived)+len(masked) > 0 {
		var why []string
		if len(survived) > 0 {
			why = append(why, fmt.Sprintf("the tests pass on %s: nothing they check notices it", strings.Join(survived, "; and on ")))
		}
		if len(masked) > 0 {
			why = append(why, fmt.Sprintf("what fails with %s fails without a mutant too when run again beside its mutants (%s): a test whose outcome changes from run to run cannot tell a mutant", strings.Join(masked, "; or with "), logline.Cut(strings.Join(unsteady, "; "), 300)))
		}
		out := fail("%s", strings.Join(why, "; "))
		out.Expected = expected
		out.Observed = fmt.Sprintf("%d of %d mutant(s) caught", caught, len(mutants))
		if len(unsteady) > 0 {
			out.Observed += "; a run with no mutant alive failed what the baseline passed"
		}
		return out
	}
	return pass("the tests fail on each of %d mutant(s) of the controller: %s", len(mutants), mutantDocs(mutants))
}

// baselineRun is one go test run, or why it could not happen.
type baselineRun struct {
	run *gobuild.TestRun
	err error
}

// clean: the tests ran and every one passed.
func (b baselineRun) clean() bool {
	return b.err == nil && len(b.run.BuildFailed) == 0 && len(b.run.Failed) == 0 && b.run.Ran()
}

// baseFailedIn are the tests run failed that failed at baseline too.
func baseFailedIn(run *gobuild.TestRun, baseFailed []string) []string {
	return slices.DeleteFunc(slices.Clone(failedNames(run)), func(n string) bool { return !slices.Contains(baseFailed, n) })
}

// failedNames are the Ginkgo specs that failed, or else the Go tests.
func failedNames(run *gobuild.TestRun) []string {
	if len(run.FailedSpecs) > 0 {
		return run.FailedSpecs
	}
	return run.Failed
}

func fired(run *gobuild.TestRun, mutant string) bool {
	for _, l := range run.Lines {
		if strings.Contains(l, testmutant.FiredPrefix+mutant) {
			return true
		}
	}
	return false
}

func mutantDocs(ms []testmutant.Mutant) string {
	docs := make([]string, len(ms))
	for i, m := range ms {
		docs[i] = m.Doc
	}
	return strings.Join(docs, "; ")
}
