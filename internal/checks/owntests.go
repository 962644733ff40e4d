package checks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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
		Doc:  "the project's own tests pass (go test, with labctl's kube-apiserver and etcd as the envtest binaries); the specs that ran and the coverage are reported (not when the build is shared with tests-catch)",
	}, runGoTest))
}

type goTestParams struct {
	// Packages are go test's package patterns (default ./...).
	Packages []string `json:"packages,omitempty"`
	// CourseMistake is a failure the course's own files make: it warns
	// instead of failing, and only when nothing else fails.
	CourseMistake *courseMistake `json:"courseMistake,omitempty"`
	// Reconciler names the reconciler whose mutants the lab's tests-catch
	// steps run (for tests-catch, default DatabaseReconciler). Set on
	// go-test, the tests are compiled once, with labctl's wrappers in the
	// controller package (no mutant alive), and go-test and every
	// tests-catch step run that one build: a build of controller-runtime's
	// tests is the costliest part of the lab. That build has no coverage
	// (see buildMutants).
	Reconciler string `json:"reconciler,omitempty"`
	// Controller is the directory of the controller package, relative to
	// the project (default internal/controller).
	Controller string `json:"controller,omitempty"`
}

// courseMistake is a spec the course gives students that fails through
// no fault of theirs (catalogue §5): kubebuilder's scaffold spec creates
// a Database with an empty spec, which the validation of lab 3.2 rejects.
type courseMistake struct {
	// Specs end the Ginkgo names of the course's specs.
	Specs []string `json:"specs"`
	// Output is a regular expression for what a failed test prints when
	// the course's mistake is why it failed.
	Output string `json:"output"`
	// Why says what the mistake is and how to fix it.
	Why string `json:"why"`
}

func (p *goTestParams) Validate() error {
	if m := p.CourseMistake; m != nil {
		if len(m.Specs) == 0 || m.Output == "" || m.Why == "" {
			return errors.New("courseMistake needs specs, output and why")
		}
		if _, err := regexp.Compile(m.Output); err != nil {
			return fmt.Errorf("courseMistake output: %w", err)
		}
	}
	return nil
}

// excuses tells whether every failure of run is the course's mistake:
// only the course's specs failed, and each failed test printed its
// signature.
func (m *courseMistake) excuses(run *gobuild.TestRun) bool {
	if m == nil || len(run.FailedSpecs) == 0 || len(run.BuildFailed) > 0 {
		return false
	}
	for _, spec := range run.FailedSpecs {
		if !slices.ContainsFunc(m.Specs, func(s string) bool { return strings.HasSuffix(spec, s) }) {
			return false
		}
	}
	signature := regexp.MustCompile(m.Output) // Validate compiled it
	for _, name := range run.Failed {
		if !slices.ContainsFunc(run.Output[name], signature.MatchString) {
			return false
		}
	}
	return true
}

// target is the controller package's directory and the reconciler that
// labctl's mutants act on.
func (p *goTestParams) target() (rel, reconciler string) {
	rel, reconciler = p.Controller, p.Reconciler
	if rel == "" {
		rel = filepath.Join("internal", "controller")
	}
	if reconciler == "" {
		reconciler = "DatabaseReconciler"
	}
	return rel, reconciler
}

func (p *goTestParams) packages() []string {
	if len(p.Packages) == 0 {
		return []string{"./..."}
	}
	return p.Packages
}

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

// testInstrumented runs the project's tests from the build that the
// tests-catch steps run, with no mutant alive: what go test -cover would
// say, from one build instead of two. It is false when that build cannot
// serve (labctl cannot instrument the controller; the tests do not
// compile with its wrappers; no package has tests): go test then runs the
// tests as they are and says in its own words what is wrong.
func testInstrumented(ctx context.Context, c *Context, p *goTestParams) (baselineRun, bool) {
	rel, reconciler := p.target()
	build := buildMutants(ctx, c, p.packages(), rel, reconciler)
	switch {
	case build.err != nil:
		return baselineRun{err: build.err}, true
	case build.skip != "" || build.failed != nil || len(build.bins) == 0:
		return baselineRun{}, false
	}
	return build.baseline(ctx, c), true
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
		if p.Reconciler != "" {
			if b, ok := testInstrumented(ctx, c, p); ok {
				return b
			}
		}
		run, err := goTest(ctx, c, pkgs)
		return baselineRun{run, err}
	}).(baselineRun)
	run, err := b.run, b.err
	if err != nil {
		return testsUnavailable(err)
	}
	msg, out, ok := judgeTestRun(run, pkgs, expected, p.CourseMistake)
	if !ok {
		return out
	}
	switch {
	case run.Coverage >= 0:
		msg += fmt.Sprintf(", coverage %.1f%% of statements", run.Coverage)
	case p.Reconciler != "":
		msg += ", coverage not measured (they ran from labctl's build with its mutants, which go's cover tool cannot instrument; go test -cover reports it)"
	}
	return pass("%s (%s)", msg, roundDur(time.Since(start)))
}

// judgeTestRun is the verdict on a run of the project's tests: what
// passed (ok) or the outcome that says what did not.
func judgeTestRun(run *gobuild.TestRun, pkgs []string, expected string, mistake *courseMistake) (passed string, out Outcome, ok bool) {
	if len(run.BuildFailed) > 0 {
		out := fail("the tests do not compile: %s", gobuild.FirstErrors(run.BuildOutput, 3))
		out.Expected, out.Observed = expected, logline.Cut(report.Clean(run.BuildOutput), 1500)
		return "", out, false
	}
	if len(run.Failed) > 0 {
		out := testsFailed(run, expected)
		if mistake.excuses(run) {
			out.Status = report.Warn
			out.Message = fmt.Sprintf("only the course's own spec fails (%s): %s", logline.Cut(strings.Join(run.FailedSpecs, "; "), 300), mistake.Why)
		}
		return "", out, false
	}
	if !run.Ran() {
		out := fail("go test %s runs no test: write them in *_test.go files of those packages", strings.Join(pkgs, " "))
		out.Expected = expected
		return "", out, false
	}
	msg := fmt.Sprintf("%d test(s) passed", len(run.Passed))
	if run.Specs > 0 {
		msg = fmt.Sprintf("%d Ginkgo spec(s) in %d test(s) passed", run.Specs, len(run.Passed))
	}
	return msg, Outcome{}, true
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
