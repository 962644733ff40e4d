package checks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Definition{
		Name: "operator-health",
		Doc:  "the operator did not restart or panic during the run (process or pod restarts, log scan)",
		Run:  runOperatorHealth,
	})
	Register(Typed(Definition{
		Name: "controller-running",
		Doc:  "the manager started the workers of the controller for a kind (its caches synced)",
	}, runControllerRunning))
	Register(Typed(Definition{
		Name: "log-mentions",
		Doc:  "the operator's log since the run started has a line matching a pattern and naming an object",
	}, runLogMentions))
	Register(Definition{
		Name: "operator-current",
		Doc:  "the running operator was built from the project's current sources (fingerprint recorded at deploy); a warning in verify, a failure in grade",
		Run:  runOperatorCurrent,
	})
	Register(Definition{
		Name: "build",
		Doc:  "every package of the project compiles (go build ./... without the final link)",
		Run:  runBuild,
	})
}

var panicLine = regexp.MustCompile(`(?i)\bpanic\b`)

func runOperatorHealth(ctx context.Context, c *Context, _ any) Outcome {
	op := c.Operator()
	if op == nil {
		return skip("no operator deployed by labctl was found, so its health cannot be read")
	}
	var problems, notes []string
	observed := false
	if op.Restarts != nil {
		n, err := op.Restarts(ctx)
		if err == nil {
			observed = true
			if d := n - c.run.restartsAtStart; d > 0 {
				problems = append(problems, fmt.Sprintf("it restarted %d time(s) during the run", d))
			}
			if c.run.restartsAtStart > 0 {
				notes = append(notes, fmt.Sprintf("it had restarted %d time(s) before this run, since it was deployed", c.run.restartsAtStart))
			}
		}
	}
	log, ok, err := c.OperatorLog(ctx)
	if ok && err == nil {
		observed = true
		var panics []string
		for _, l := range strings.Split(log, "\n") {
			if panicLine.MatchString(l) {
				panics = append(panics, logline.Cut(strings.TrimSpace(l), 200))
			}
		}
		if len(panics) > 0 {
			problems = append(problems, fmt.Sprintf("its log shows %d panic line(s), first: %s", len(panics), panics[0]))
		}
	}
	if !observed {
		return skip("neither restarts nor logs of the operator can be read here")
	}
	out := Outcome{Notes: notes, Expected: "no restart and no panic while the checks ran"}
	if len(problems) > 0 {
		out.Status = report.Fail
		out.Message = "the operator is not healthy: " + strings.Join(problems, "; ")
		out.Observed = strings.Join(problems, "; ")
		return out
	}
	out.Status = report.Pass
	out.Message = "the operator ran through the checks without restarting or panicking"
	if len(notes) > 0 {
		out.Status = report.Warn
		out.Message += "; " + strings.Join(notes, "; ")
	}
	return out
}

type controllerParams struct {
	Kind string `json:"kind"`
}

func (p *controllerParams) Validate() error {
	if p.Kind == "" {
		return errors.New("needs kind")
	}
	return nil
}

func runControllerRunning(ctx context.Context, c *Context, p *controllerParams) Outcome {
	op := c.Operator()
	if op == nil || op.Logs == nil {
		return skip("the operator's log cannot be read here")
	}
	kind := regexp.MustCompile(`"controllerKind"\s*:\s*"` + regexp.QuoteMeta(p.Kind) + `"`)
	started, workers := false, false
	// A manager deployed a moment ago may not have started its controllers
	// yet (they start once its caches sync): read its log until they have,
	// or Timeout. A log file offers nothing to watch, so this polls it.
	deadline := time.Now().Add(c.Timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		raw, err := op.Logs(ctx)
		if err != nil {
			return errorf("reading the operator's log: %v", oneLine(err))
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if !kind.MatchString(l) {
				continue
			}
			if strings.Contains(l, "Starting Controller") {
				started = true
			}
			if strings.Contains(l, "Starting workers") {
				workers = true
			}
		}
		if workers || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return errorf("reading the operator's log: %v", ctx.Err())
		case <-tick.C:
		}
	}
	expected := fmt.Sprintf("the manager logs \"Starting workers\" for controllerKind %s", p.Kind)
	if workers {
		return pass("the manager runs the %s controller (its workers started)", p.Kind)
	}
	// controller-runtime logs "Starting Controller" only once the
	// controller's sources have synced: a controller that registered its
	// sources but never started is waiting for an informer, and a refused
	// list or watch is the usual reason.
	raw, _ := op.Logs(ctx)
	sources := false
	var refusedLines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if kind.MatchString(l) && strings.Contains(l, "Starting EventSource") {
			sources = true
		}
		if strings.Contains(l, "forbidden") && len(refusedLines) < 2 {
			refusedLines = append(refusedLines, logline.Cut(strings.TrimSpace(report.CleanLine(compactLogLine(l))), 300))
		}
	}
	refused := c.run.forbidden(ctx)
	if len(refused) > 0 || len(refusedLines) > 0 {
		out := Outcome{Status: report.Fail, Expected: expected,
			Message: fmt.Sprintf("the %s controller never started: the API forbids the operator requests its caches need (list/watch), so they never sync; grant them with +kubebuilder:rbac markers and make manifests", p.Kind)}
		if len(refused) > 0 {
			out.Observed = "403 Forbidden: " + strings.Join(refused, "; ")
		} else {
			out.Observed = strings.Join(refusedLines, " | ")
		}
		return out
	}
	switch {
	case started:
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("the %s controller started but its workers never did: its informers did not sync (RBAC to list/watch what it watches?)", p.Kind),
			Expected: expected, Observed: "\"Starting Controller\" but no \"Starting workers\""}
	case sources:
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("the %s controller registered its event sources but did not start within %s: its caches did not sync (RBAC to list/watch what it watches? a kind the API does not serve?)", p.Kind, roundDur(c.Timeout)),
			Expected: expected, Observed: "\"Starting EventSource\" but no \"Starting Controller\""}
	}
	return Outcome{Status: report.Fail, Message: fmt.Sprintf("the manager never started a controller for %s: is it set up in cmd/main.go (SetupWithManager)?", p.Kind),
		Expected: expected, Observed: "no controller for " + p.Kind + " in the log"}
}

type logParams struct {
	// Pattern is a regular expression ((?i) for case-insensitive).
	Pattern string `json:"pattern"`
	// Name must appear on the line too (the object the lab is about).
	Name string `json:"name"`
	// Controller (a kind) requires the line to come from that
	// controller's reconcile logger (log.FromContext: controller-runtime
	// adds controllerKind) and to be the operator's own message, not one
	// controller-runtime logs for it (Reconciler error, Starting workers).
	Controller string `json:"controller,omitempty"`
}

// runtimeMessages are what controller-runtime itself logs with a
// controller's keys.
var runtimeMessages = []string{"Reconciler error", "Starting EventSource", "Starting Controller", "Starting workers",
	"Shutdown signal received, waiting for all workers to finish", "All workers finished",
	"Warning: Reconciler returned both a non-zero result and a non-nil error", "Observed a panic"}

func (p *logParams) Validate() error {
	if p.Pattern == "" {
		return errors.New("needs pattern")
	}
	_, err := regexp.Compile(p.Pattern)
	return err
}

func runLogMentions(ctx context.Context, c *Context, p *logParams) Outcome {
	log, ok, err := c.OperatorLog(ctx)
	if !ok {
		return skip("the operator's log cannot be read here")
	}
	if err != nil {
		return errorf("reading the operator's log: %v", oneLine(err))
	}
	re := regexp.MustCompile(p.Pattern)
	lines := strings.Split(log, "\n")
	var elsewhere string // a matching line from outside the controller
	for _, l := range lines {
		if !re.MatchString(l) || (p.Name != "" && !strings.Contains(l, p.Name)) {
			continue
		}
		if p.Controller != "" {
			ll, ok := parseLogLine(l)
			if !ok || ll.kv["controllerKind"] != p.Controller || slices.Contains(runtimeMessages, ll.msg) {
				if elsewhere == "" {
					elsewhere = logline.Cut(strings.TrimSpace(compactLogLine(l)), 200)
				}
				continue
			}
		}
		return pass("the operator's log mentions it: %s", logline.Cut(strings.TrimSpace(compactLogLine(l)), 200))
	}
	want := fmt.Sprintf("a log line matching /%s/", p.Pattern)
	if p.Name != "" {
		want += " that names " + p.Name
	}
	if p.Controller != "" {
		want += fmt.Sprintf(", written by the %s controller's Reconcile with the logger from log.FromContext(ctx)", p.Controller)
	}
	out := Outcome{Status: report.Fail, Message: fmt.Sprintf("the operator's log since the run started has no line matching /%s/ about %s (%d lines read)", p.Pattern, p.Name, len(lines)-1),
		Expected: want, Observed: "none", Related: []string{p.Name}}
	if elsewhere != "" {
		out.Message = fmt.Sprintf("no line about %s comes from the %s controller's reconcile logger (log.FromContext(ctx)); lines from elsewhere do not show its coordination", p.Name, p.Controller)
		out.Observed = "only lines from elsewhere, e.g.: " + elsewhere
	}
	return out
}

// runBuild compiles every package of the project, as go build ./... does,
// without linking the manager binary: `go list -export` compiles (or takes
// from the build cache) every package and reports the same compiler
// errors, in a fraction of the time a link takes; the manager labctl runs
// was linked when it was deployed. One compile at a time (-p 1), at low
// priority: the cluster and the operator share the machine with it while
// the other checks run.
func runBuild(ctx context.Context, c *Context, _ any) Outcome {
	dir := c.ProjectDir()
	if dir == "" {
		return skip("no project directory to build (pass --project DIR)")
	}
	if _, err := os.Stat(dir + "/go.mod"); err != nil {
		return fail("%s has no go.mod", dir)
	}
	runGo := c.run.o.Go
	if runGo == nil {
		runGo = goHere
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	start := time.Now()
	list := gobuild.Command{Dir: dir, Args: []string{"list", "-export", "-p", "1", "./..."}, Yield: true}
	stderr, err := runGo(ctx, list)
	var exit *exec.ExitError
	if errors.As(err, &exit) && emptyExport.MatchString(stderr) {
		// The go command handed the compiler no export file for a
		// dependency: its build cache, not the project (seen when another
		// go command filled the same cache at the same time). Once more;
		// twice is the toolchain's problem: the check could not run, which
		// costs the project nothing (skipped, not an error: grade.Score
		// charges errors).
		if stderr, err = runGo(ctx, list); errors.As(err, &exit) && emptyExport.MatchString(stderr) {
			return skip("the go command's build cache gave the compiler no export data (%s), twice: a toolchain problem, not the project's; run `go clean -cache` and verify again", emptyExport.FindString(stderr))
		}
	}
	switch {
	case errors.Is(err, errNoGo):
		return skip("the Go toolchain is not installed, so the project cannot be built here")
	case err != nil && ctx.Err() != nil:
		return errorf("compiling the project did not finish within %s", roundDur(c.Timeout))
	case errors.As(err, &exit):
		out := fail("the project does not compile: %s", gobuild.FirstErrors(stderr, 3))
		out.Expected = "go build ./... succeeds"
		out.Observed = logline.Cut(report.Clean(stderr), 1500)
		return out
	case err != nil:
		return errorf("cannot run go to compile the project: %v", oneLine(err))
	}
	return pass("every package of the project compiles (%s)", roundDur(time.Since(start)))
}

// emptyExport is the compiler's error for a dependency whose export file
// the go command named as "" (golang/go#73368).
var emptyExport = regexp.MustCompile(`could not import \S+ \(open : no such file or directory\)`)

// errNoGo: there is no go command on PATH.
var errNoGo = errors.New("the go command is not on PATH")

// goHere runs the go on PATH as this process's user, with its
// environment (cmd.Read needs no sharing: everything is readable here).
func goHere(ctx context.Context, c gobuild.Command) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errNoGo
	}
	// The go command's work directory is ours: go removes its own only
	// when it exits normally, and a verify that is interrupted kills it.
	work, err := os.MkdirTemp("", "labctl-build-")
	if err != nil {
		return "", fmt.Errorf("cannot create a work directory for go: %w", err)
	}
	defer os.RemoveAll(work)
	// Whatever the command leaves running when it ends (a test binary
	// that died before its suite stopped envtest's etcd and
	// kube-apiserver) inherited this entry, and is killed by it; what it
	// leaves on disk (their data directories) is in work, as TMPDIR.
	mark := "LABCTL_GO_RUN=" + filepath.Base(work)
	defer proc.KillMarked(mark)
	cmd := exec.CommandContext(ctx, goBin, c.Args...)
	// When ctx ends, go and everything it started go with it (a test
	// binary under test2json holds the output pipe, and Wait would wait
	// for it): the step must not outlive its timeout.
	cmd.Cancel = func() error {
		proc.KillMarked(mark)
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = c.Dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOTMPDIR="+work, "TMPDIR="+work, mark), c.Env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	}
	err = cmd.Start()
	if err == nil {
		if c.Yield {
			// The cluster it is checked against keeps its share of the
			// CPU; the compilers the build starts inherit the priority.
			proc.Renice(cmd.Process.Pid, 10)
		}
		err = cmd.Wait()
	}
	return stderr.String(), err
}

func runOperatorCurrent(_ context.Context, c *Context, _ any) Outcome {
	op := c.Operator()
	if op == nil {
		return skip("no operator deployed by labctl was found, so what it was built from is unknown")
	}
	changed, known, err := op.SourceChanged(c.ProjectDir())
	if err != nil {
		return errorf("fingerprinting the project's sources: %v", oneLine(err))
	}
	if !known {
		return skip("no source fingerprint was recorded when the operator was deployed (deployed in-cluster, or no project directory), so whether it is current cannot be told")
	}
	if !changed {
		return pass("the running operator was built from the project's current sources")
	}
	out := Outcome{Status: report.Fail,
		Message:  "the running operator was built from older sources: the project changed after it was deployed, so the cluster checks judge other code than the source checks read; deploy it again (labctl up --project DIR)",
		Expected: "the sources' fingerprint at deploy equals the project's now",
		Observed: "the project's files changed since the deploy"}
	if !c.run.o.Grading {
		out.Status = report.Warn
	}
	return out
}
