// One submission's attempt: its box, build, cluster, operator and checks, each a named phase, and why it stopped.

package grade

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/local"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/userr"
	labverify "github.com/labctl/labctl/internal/verify"
)

// attempt is one submission's grading: its result so far and the ways it
// ends.
type attempt struct {
	g      *grader
	sub    Submission
	parent context.Context // the run's: cancelled means interrupted
	res    *report.GradedSubmission
}

func (a *attempt) phase(name string, since time.Time) {
	a.res.Phases = append(a.res.Phases, report.Phase{Name: name, Duration: report.Duration(time.Since(since))})
}

func (a *attempt) finish() *report.GradedSubmission {
	if a.res.Tasks == nil {
		a.res.Tasks = zeroScores(a.g.o.Lab, report.Error)
	}
	return a.res
}

func (a *attempt) stopped(stage string) *report.GradedSubmission {
	if a.parent.Err() != nil {
		return nil
	}
	a.res.Outcome = report.OutcomeTimeout
	a.res.Message = fmt.Sprintf("the time limit of %s ended grading while %s", a.g.o.Timeout, stage)
	return a.finish()
}

func (a *attempt) failWith(outcome report.GradeOutcome, err error) *report.GradedSubmission {
	a.res.Outcome = outcome
	a.res.Message = userr.Message(err)
	return a.finish()
}

// ended is a phase's word that the attempt is over, with its result (nil
// when the whole run was interrupted).
type ended struct{ res *report.GradedSubmission }

// run grades the project in dir (box: its sandbox, nil when unsandboxed):
// a cluster of its own, its manager built and deployed, the lab's checks.
// Its phases: load, startCluster (torn down at the end), deploy, verify.
func (a *attempt) run(ctx context.Context, dir, project string, box *sandbox.Box) *report.GradedSubmission {
	g, sub := a.g, a.sub
	log := newStepLog(func(step string) { g.stages.detail(sub.Student, step) })
	defer func() { g.out.saveLog(sub.Student, "grade.log", log.Bytes()) }()

	p, withOperator, err := a.load(project)
	if err != nil {
		return a.failWith(report.OutcomeError, err)
	}
	c, prov, err := a.startCluster(ctx, dir, log)
	defer func() {
		g.stages.set(sub.Student, "tearing down", "")
		t := time.Now()
		if notes := g.teardown(ctx, prov, c, box); len(notes) > 0 {
			a.res.Notes = append(a.res.Notes, notes...)
		}
		a.phase("teardown", t)
	}()
	if err != nil {
		if ctx.Err() != nil {
			return a.stopped("starting its cluster")
		}
		return a.failWith(report.OutcomeError, fmt.Errorf("its cluster did not start: %w", err))
	}
	var op *operator.Operator
	if withOperator {
		var end *ended
		if op, end = a.deploy(ctx, c, p, box, log); end != nil {
			return end.res
		}
	}
	return a.verify(ctx, c, p, op, box)
}

// load reads the submission's project. A lab without an operator (1.4: a
// CRD the student writes) has no kubebuilder project to load, build or
// run: its checks read the files; an operatorless lab (6.2) has one, but
// nothing of it runs in the cluster.
func (a *attempt) load(project string) (p *deploy.Project, withOperator bool, err error) {
	ref, err := reference.Lookup(a.g.o.Lab.Project)
	if err != nil {
		return nil, false, err
	}
	if !ref.Operator {
		return &deploy.Project{Dir: project}, false, nil
	}
	p, err = deploy.LoadProject(project)
	// Lab 6.2 judges the project's own tests: its manager is neither
	// built nor run.
	return p, err == nil && !a.g.o.Lab.Operatorless, err
}

// startCluster starts a fresh cluster of the submission's own: different
// CRDs and operators never meet. The provider is returned even when the
// cluster did not start, so that what was started is torn down.
func (a *attempt) startCluster(ctx context.Context, dir string, log *stepLog) (*cluster.Cluster, *local.Provider, error) {
	g := a.g
	g.stages.set(a.sub.Student, "cluster", "")
	t := time.Now()
	prov := &local.Provider{StateRoot: clustersDir(dir), TiedToParent: true, Binaries: g.o.Binaries, Operators: deploy.AsProcess{TiedToParent: true}}
	c, err := prov.Up(ctx, cluster.UpOptions{Name: clusterName, Streams: log.streams(), SkipKubeconfigMerge: true, BinDir: g.o.BinDir})
	a.phase("cluster", t)
	return c, prov, err
}

// deploy builds the manager, installs the CRDs and RBAC and runs the
// manager under its identity. A manager that does not become ready is
// still verified (what needs no running manager, schema and source,
// still counts); a build or install that fails ends the attempt.
func (a *attempt) deploy(ctx context.Context, c *cluster.Cluster, p *deploy.Project, box *sandbox.Box, log *stepLog) (*operator.Operator, *ended) {
	g, res := a.g, a.res
	g.stages.set(a.sub.Student, "deploying", "")
	t := time.Now()
	op, err := deploy.RunLocal(ctx, c, p, deploy.LocalOptions{
		Streams:      log.streams(),
		Go:           g.o.Go,
		TiedToParent: true,
		ReadyTimeout: g.o.ManagerReadyTimeout,
		Limits:       g.o.Limits,
		Box:          box,
		KeepUnready:  true,
	})
	a.phase("deploy", t)
	if op != nil && op.SourceHash != "" {
		res.Built = fmt.Sprintf("built by labctl from the main package of the submission's cmd/main.go (sources %.12s)", op.SourceHash)
	}
	var buildErr *gobuild.Error
	switch {
	case err == nil:
		return op, nil
	case errors.As(err, &buildErr):
		res.Outcome = report.OutcomeBuildFailed
		res.BuildErrors = buildErrorLines(buildErr.Output, 12)
		res.Message = "the project does not build: " + gobuild.FirstErrors(buildErr.Output, 1)
		res.Tasks = zeroScores(g.o.Lab, report.Fail)
		return nil, &ended{a.finish()}
	case ctx.Err() != nil:
		return nil, &ended{a.stopped("building and starting its manager")}
	case userr.Code(err) == userr.ExitEnvironment: // no Go toolchain, ...
		return nil, &ended{a.failWith(report.OutcomeError, err)}
	}
	// The manager did not become ready (it exits at start, or hangs). Its
	// supervisor keeps restarting it: verify anyway.
	running, cerr := c.CurrentOperator(ctx, "", "")
	if cerr != nil {
		// No manager was started: config/default did not render or
		// install (the project's fault, like a build error).
		res.Tasks = zeroScores(g.o.Lab, report.Fail)
		return nil, &ended{a.failWith(report.OutcomeDeployFailed, err)}
	}
	res.Message = "the manager did not become ready"
	if cause := errors.Unwrap(err); cause != nil {
		res.Message += " (" + cause.Error() + ")"
	}
	if b, lerr := running.Logs(ctx); lerr == nil {
		if line := firstError(string(b)); line != "" {
			res.Message += ": " + line
		}
	}
	return running, nil
}

// verify runs the lab's checks against the cluster and scores them. Checks
// that could not decide are measured again (verify.Measure).
func (a *attempt) verify(ctx context.Context, c *cluster.Cluster, p *deploy.Project, op *operator.Operator, box *sandbox.Box) *report.GradedSubmission {
	res := a.res
	t := time.Now()
	rep, note, err := labverify.Measure(ctx, func(ctx context.Context) (*report.Report, error) {
		return a.runChecks(ctx, c, p, op, box)
	})
	a.phase("verify", t)
	if op != nil && op.Logs != nil {
		if b, lerr := op.Logs(context.WithoutCancel(ctx)); lerr == nil {
			a.g.out.saveLog(a.sub.Student, "manager.log", b)
		}
	}
	if note != "" {
		res.Notes = append(res.Notes, note)
	}
	if err != nil {
		if ctx.Err() != nil {
			return a.stopped("verifying")
		}
		return a.failWith(report.OutcomeError, fmt.Errorf("verification could not run: %w", err))
	}
	if a.parent.Err() != nil {
		return nil
	}
	res.Report = rep
	res.Tasks, res.Score = Score(a.g.o.Lab, rep, a.g.o.Credit)
	if ctx.Err() != nil {
		res.Outcome = report.OutcomeTimeout
		res.Message = fmt.Sprintf("the time limit of %s ended grading while verifying", a.g.o.Timeout)
	}
	if op != nil && op.Restarts != nil {
		if n, _ := op.Restarts(context.WithoutCancel(ctx)); n > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("the manager restarted %d time(s) during grading", n))
		}
	}
	return a.finish()
}

// runChecks runs the lab's checks once, showing their progress.
func (a *attempt) runChecks(ctx context.Context, c *cluster.Cluster, p *deploy.Project, op *operator.Operator, box *sandbox.Box) (*report.Report, error) {
	g, sub := a.g, a.sub
	g.stages.set(sub.Student, "verifying", fmt.Sprintf("0/%d checks", g.checks))
	var mu sync.Mutex
	done := 0
	// The build check compiles every package, those the manager does not
	// import included: in the box, as the manager was built.
	var runGo checks.GoRunner
	if box != nil {
		runGo = deploy.BoxedGo{Box: box, Go: g.o.Go, Nice: 10}.Run
	}
	return g.o.Verify(ctx, checks.Options{
		Lab:        g.o.Lab,
		Cluster:    c,
		Operator:   op,
		ProjectDir: p.Dir,
		Lang:       g.o.Lang,
		Grading:    true,
		Go:         runGo,
		OnCheck: func(*report.CheckResult) {
			mu.Lock()
			done++
			n := done
			mu.Unlock()
			g.stages.detail(sub.Student, fmt.Sprintf("%d/%d checks", n, g.checks))
		},
	})
}

// maxSubmissionBytes bounds a submission's private copy.
const maxSubmissionBytes = 512 << 20

// maxSubmissionFiles bounds the number of files and directories in it:
// a course project has a few hundred; 200,000 empty files would hold a
// grading slot for minutes.
const maxSubmissionFiles = 20_000

// newBox creates a submission's sandbox under dir, with its own uid and a
// private copy of the project, bounded in bytes, files and ctx's time.
func (g *grader) newBox(ctx context.Context, dir, student, project string) (*sandbox.Box, error) {
	box, err := sandbox.NewBox(filepath.Join(dir, "sandbox"), sandbox.UIDFor(g.work+"\x00"+student), g.hide)
	if err != nil {
		return nil, err
	}
	if err := sandbox.CopyTree(ctx, project, box.Src(), sandbox.CopyLimits{Bytes: maxSubmissionBytes, Files: maxSubmissionFiles}); err != nil {
		return nil, err
	}
	return box, nil
}

// clustersDir is where a submission's cluster keeps its state, under its
// work directory dir.
func clustersDir(dir string) string { return filepath.Join(dir, "clusters") }

// clusterName names every submission's cluster (each under its own state
// root).
const clusterName = "grade"

// teardown stops the manager and the cluster and makes sure no process
// of the submission is left (see stopSubmission); whatever went wrong, or
// had to be killed, is noted.
func (g *grader) teardown(ctx context.Context, prov *local.Provider, c *cluster.Cluster, box *sandbox.Box) []string {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	uid := noSandbox
	if box != nil {
		uid = box.UID
	}
	killed, problems := stopSubmission(tctx, prov, c, uid)
	var notes []string
	for _, p := range problems {
		notes = append(notes, "teardown: "+p)
	}
	if killed > 0 {
		notes = append(notes, fmt.Sprintf("teardown: killed %d process(es) left after the cluster stopped", killed))
	}
	return notes
}

// stopGrace is how long a manager gets to exit on SIGTERM at teardown.
const stopGrace = 2 * time.Second

// firstError finds the first line of a manager's log that reports an
// error (controller-runtime's ERROR level, a panic, a fatal runtime error),
// without the timestamp.
func firstError(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "==== labctl") {
			continue
		}
		for _, mark := range []string{"\tERROR\t", "panic:", "fatal error:", "Error:"} {
			if i := strings.Index(l, mark); i >= 0 {
				line := strings.TrimSpace(strings.ReplaceAll(l[i:], "\t", " "))
				if len(line) > 300 {
					line = line[:300] + "…"
				}
				return report.CleanLine(line)
			}
		}
	}
	return ""
}

// buildErrorLines returns the first n meaningful lines of go build output.
func buildErrorLines(out string, n int) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, " \t\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		lines = append(lines, report.Clean(l))
		if len(lines) == n {
			break
		}
	}
	return lines
}
