// Package grade grades a class: each submission (a kubebuilder project,
// from a directory or a git repository) is built, given its own fresh
// local cluster, deployed with its own CRDs and RBAC, its manager run
// under its own identity with CPU-time, memory and wall-time limits,
// verified with the lab's checks (internal/checks), and torn down. Scores
// come from the lab's points, credited task by task; the gradebook
// (CSV, JSON, JUnit), the class report (HTML) and each student's Markdown
// feedback are written as each submission finishes, so an interrupted run
// keeps what it graded.
package grade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/labctl/labctl/internal/cgroup"
	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/supervise"
	"github.com/labctl/labctl/internal/userr"
)

// Defaults of Options.
const (
	DefaultTimeout = 10 * time.Minute
	// DefaultCPU is the CPU time a submission's manager may use: a correct
	// one needs a few seconds for a whole lab; a spinning one is stopped
	// before it starves the other submissions for long.
	DefaultCPU = 90 * time.Second
	// DefaultMemory bounds a manager's memory (a correct one uses ~50 MiB).
	DefaultMemory = 1 << 30
	// perJobMemory and one core are what a cluster and a manager need at
	// start-up, for the default of --jobs.
	perJobMemory = 512 << 20
)

// VerifyFunc runs a lab's checks; checks.Run in production.
type VerifyFunc func(ctx context.Context, o checks.Options) (*report.Report, error)

// Options are the inputs of Run.
type Options struct {
	Lab         *labs.Lab
	Submissions []Submission
	// Jobs is how many submissions are graded at once (0: DefaultJobs).
	Jobs int
	// Timeout bounds each submission, clone to teardown (0: DefaultTimeout).
	Timeout time.Duration
	// OutDir receives gradebook.csv, results.json, junit.xml, report.html,
	// feedback/ and logs/. Results already there for other students are
	// kept.
	OutDir string
	// RevealHidden shows hidden tasks' checks in the feedback files.
	RevealHidden bool
	// Credit is the scoring policy (default CreditTasks).
	Credit Credit
	// Lang of titles, hints and feedback ("en" or "ru").
	Lang string
	// Version is labctl's build version, recorded in results.json and
	// report.html.
	Version string
	// Limits for each manager (zero value: DefaultCPU and DefaultMemory;
	// set NoLimits to run without).
	Limits   supervise.Limits
	NoLimits bool
	// BoxLimits bound each submission's box as a whole, cluster and build
	// included, through a cgroup (zero value: DefaultBoxLimits; none with
	// NoLimits or UnsafeNoSandbox, which has no boxes).
	BoxLimits cgroup.Limits
	// ManagerReadyTimeout bounds the wait for a manager's readiness
	// (default 60s); one that never gets ready is still verified.
	ManagerReadyTimeout time.Duration

	// Streams receive the progress display (stderr) and the summary
	// table (stdout).
	Streams *iostreams.IOStreams
	// Binaries and BinDir locate the control-plane binaries, as for
	// `labctl up` (nil and "": controlplane.Ensure's default).
	Binaries func(ctx context.Context, s *iostreams.IOStreams) (*controlplane.Binaries, error)
	BinDir   string
	// WorkDir holds clones, cluster state and temporary files while
	// grading (default a new directory under WorkRoot, removed at the
	// end; a run that finds one left by a killed grader removes it).
	WorkDir string
	// Verify replaces checks.Run (tests).
	Verify VerifyFunc
	// Git is the git command (default "git").
	Git string
	// Go is the go command used to build managers (default "go").
	Go string
	// UnsafeNoSandbox builds and runs submissions as the grader's own
	// user, unconfined (only for machines that cannot sandbox; see
	// sandbox.Probe). By default each submission is built and run as its
	// own unprivileged user in its own namespaces, and Run refuses when
	// that is not possible.
	UnsafeNoSandbox bool
	// Policy names the grading policy already applied to Lab (feedback
	// says which); "" for the lab's defaults.
	Policy string
}

// Run grades the submissions and returns the gradebook (everything in
// OutDir, other students included). Submissions that could not be graded
// (OutcomeError) make the returned error non-nil after everything was
// written; so does an interrupted run, which keeps the results it has.
func Run(ctx context.Context, o Options) (*report.Gradebook, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	out, err := openOutputs(o.OutDir, o.Lab, o.Lang, o.Credit, o.RevealHidden)
	if err != nil {
		return nil, err
	}
	if err := out.usePolicy(o.Policy); err != nil {
		return nil, err
	}
	// Written with the first result; describes the rows this run grades.
	out.gb.Run = &report.GradeRun{Version: o.Version, Started: time.Now().UTC(), Jobs: o.Jobs,
		Timeout: report.Duration(o.Timeout), CPU: report.Duration(o.Limits.CPU), MemoryBytes: int64(o.Limits.Memory)}
	work, cleanup, err := prepareWork(ctx, o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	g := newGrader(ctx, o, out, work)
	defer g.progress.stop()
	results, writeErr := g.all(ctx)
	g.progress.stop()
	if writeErr != nil {
		return out.gb, userr.Wrap(writeErr, userr.ExitFailure, "cannot write the results: "+writeErr.Error(), "check "+o.OutDir)
	}
	printSummary(o.Streams, o.Lab, results, o.OutDir)
	if ctx.Err() != nil {
		return out.gb, ctx.Err()
	}
	var failed []string
	for _, r := range results {
		if r != nil && r.Outcome == report.OutcomeError {
			failed = append(failed, r.Student+" ("+r.Message+")")
		}
	}
	if len(failed) > 0 {
		return out.gb, userr.New(fmt.Sprintf("%d submission(s) could not be graded: %s", len(failed), strings.Join(failed, "; ")),
			"fix what the message says and grade those students again (their rows are replaced)")
	}
	return out.gb, nil
}

// complete checks the options and fills in their defaults, before any
// work: a roster or flag mistake costs nothing.
func (o *Options) complete() error {
	if o.Lab == nil || len(o.Submissions) == 0 {
		return errors.New("grade.Run needs a lab and submissions")
	}
	if err := checks.Validate(o.Lab); err != nil {
		return err
	}
	// The grader's machine is not the student's: what only that machine
	// could show (the tools a lab installs) is not graded.
	o.Lab = checks.ForGrading(o.Lab)
	for _, s := range o.Submissions {
		if err := ValidStudent(s.Student); err != nil {
			return userr.Usage(err.Error(), "fix the roster")
		}
	}
	if o.Lang == "" {
		o.Lang = "en"
	}
	if o.Jobs <= 0 {
		o.Jobs = DefaultJobs()
	}
	o.Jobs = min(o.Jobs, len(o.Submissions))
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	switch o.Credit {
	case "":
		o.Credit = CreditTasks
	case CreditChecks, CreditTasks:
	default:
		return userr.Usage(fmt.Sprintf("unknown credit policy %q", o.Credit), "use tasks or checks")
	}
	if o.Limits.IsZero() && !o.NoLimits {
		o.Limits = supervise.Limits{CPU: DefaultCPU, Memory: DefaultMemory}
	}
	o.Limits.StopGrace = stopGrace
	if o.ManagerReadyTimeout <= 0 {
		o.ManagerReadyTimeout = time.Minute
	}
	if o.Verify == nil {
		o.Verify = checks.Run
	}
	if o.Streams == nil {
		o.Streams, _, _ = iostreams.Test(false)
	}
	if o.OutDir == "" {
		o.OutDir = "grades-" + o.Lab.ID
	}
	if !o.UnsafeNoSandbox {
		if sup := sandbox.Probe(); !sup.OK {
			return userr.Env("cannot sandbox the submissions: "+sup.Reason,
				"grade as root on a machine with mount and pid namespaces (`labctl doctor` tells), or pass --unsafe-no-sandbox to run the students' code unconfined, as you")
		}
	}
	return nil
}

// prepareWork makes the run's work directory (after cleaning what killed
// runs left) and points the grader's temporary files into it; cleanup
// removes both and restores TMPDIR.
func prepareWork(ctx context.Context, o Options) (work string, cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	work = o.WorkDir
	if work == "" {
		root := WorkRoot()
		cleaned, err := CleanStale(ctx, root)
		if err != nil {
			return "", nil, userr.Wrap(err, userr.ExitFailure, "cannot clean up after earlier grading runs: "+err.Error(), "check "+root)
		}
		if line := cleaned.String(); line != "" {
			fmt.Fprintln(o.Streams.ErrOut, line)
		}
		if work, err = newWorkDir(root); err != nil {
			return "", nil, userr.Wrap(err, userr.ExitFailure, err.Error(), "check the disk and XDG_STATE_HOME")
		}
		made := work
		undo = append(undo, func() { os.RemoveAll(made) })
	}
	if work, err = filepath.Abs(work); err != nil {
		return "", nil, err
	}
	restoreTemp, err := useTempDir(filepath.Join(work, tempDirName))
	if err != nil {
		return "", nil, userr.Wrap(err, userr.ExitFailure, "cannot create the grader's temporary directory: "+err.Error(), "check the disk and XDG_STATE_HOME")
	}
	tmp := filepath.Join(work, tempDirName)
	undo = append(undo, restoreTemp, func() { os.RemoveAll(tmp) })
	return work, cleanup, nil
}

// newGrader says what this run will do (limits, sandbox, warnings) and
// sets up what every submission's grading shares.
func newGrader(ctx context.Context, o Options, out *outputs, work string) *grader {
	s := o.Streams
	if o.UnsafeNoSandbox {
		fmt.Fprintln(s.ErrOut, "WARNING: --unsafe-no-sandbox: the submissions' code runs as you, unconfined; a hostile submission can change its grade or anyone's.")
	}
	limits := "no limits"
	if !o.Limits.IsZero() {
		limits = describeLimits(o.Limits)
	}
	fmt.Fprintf(s.ErrOut, "Grading %d submission(s) of %s, %d at a time; each manager: %s, wall time %s.\n",
		len(o.Submissions), o.Lab.ID, o.Jobs, limits, o.Timeout)

	g := &grader{o: o, out: out, work: work, checks: checks.CountChecks(o.Lab, nil)}
	g.binaries = sync.OnceValues(func() (*controlplane.Binaries, error) { return resolveBinaries(ctx, o) })
	if !o.UnsafeNoSandbox {
		g.hide = hiddenFromSubmissions(work, o.OutDir, o.Submissions)
		if !o.NoLimits {
			lim := o.BoxLimits
			if lim == (cgroup.Limits{}) {
				lim = DefaultBoxLimits()
			}
			g.boxLimits = &lim
		}
		line := describeBoxLimits(g.boxLimits, cgroup.Detect())
		out.gb.Run.BoxLimits = line
		fmt.Fprintf(s.ErrOut, "%s.\n", strings.ToUpper(line[:1])+line[1:])
	}
	g.progress = newProgress(s, o.Submissions)
	g.stages = g.progress
	return g
}

// all grades every submission, o.Jobs at a time, recording each result as
// it comes; an interrupted run grades no more and records none it cut.
func (g *grader) all(ctx context.Context) (results []*report.GradedSubmission, writeErr error) {
	results = make([]*report.GradedSubmission, len(g.o.Submissions))
	var wg sync.WaitGroup
	sem := make(chan struct{}, g.o.Jobs)
	var mu sync.Mutex
	for i, sub := range g.o.Submissions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				g.progress.finish(sub.Student, "not graded (interrupted)", false)
				return
			}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				g.progress.finish(sub.Student, "not graded (interrupted)", false)
				return
			}
			res := g.one(ctx, sub)
			if res == nil { // interrupted: nothing recorded
				g.progress.finish(sub.Student, "interrupted", false)
				return
			}
			results[i] = res
			if err := g.out.record(res); err != nil {
				mu.Lock()
				writeErr = errors.Join(writeErr, err)
				mu.Unlock()
			}
			g.progress.finish(sub.Student, summaryLine(res), res.Outcome != report.OutcomeError)
		}()
	}
	wg.Wait()
	return results, writeErr
}

func summaryLine(r *report.GradedSubmission) string {
	line := fmt.Sprintf("%s/%s", report.FormatPoints(r.Score), report.FormatPoints(r.MaxPoints))
	if r.Outcome != report.OutcomeGraded {
		line += " " + string(r.Outcome)
	}
	return line
}

// grader is one Run's shared state.
type grader struct {
	o        Options
	out      *outputs
	work     string
	checks   int
	progress *progress
	// stages hears where a submission is (the progress display, or in a
	// box the pipe to the grader).
	stages stageReporter
	// hide is what no sandbox sees (nil: no sandboxes).
	hide []string
	// binaries are the control plane's, resolved once for every box (a
	// box has no network to fetch or build them), when the first needs
	// them.
	binaries func() (*controlplane.Binaries, error)
	// boxLimits bound each box through a cgroup (nil: none).
	boxLimits *cgroup.Limits
}

// resolveBinaries finds (or fetches, or builds) the control plane as
// each cluster would.
func resolveBinaries(ctx context.Context, o Options) (*controlplane.Binaries, error) {
	if o.Binaries != nil && o.BinDir == "" {
		return o.Binaries(ctx, o.Streams)
	}
	return controlplane.Ensure(ctx, controlplane.Options{BinDir: o.BinDir})
}

// hiddenFromSubmissions lists what a submission's sandbox covers: the
// grader's secrets, the work directory (every submission's copy and
// cluster), the output directory and every submission's source.
func hiddenFromSubmissions(work, outDir string, subs []Submission) []string {
	hide := append(sandbox.GraderSecrets(), work)
	if abs, err := filepath.Abs(outDir); err == nil {
		hide = append(hide, abs)
	}
	for _, s := range subs {
		if s.Dir != "" {
			hide = append(hide, s.Dir)
		}
		if s.Repo != "" && isLocalPath(s.Repo) {
			hide = append(hide, s.Repo)
		}
	}
	return hide
}

// one grades one submission. It returns nil when the run was interrupted
// (nothing to record); every other ending is a result. The grader itself
// clones the submission and makes its private copy; what follows (its
// cluster, build, manager and checks) runs in a box of its own (see
// gradeInBox) unless grading is unsandboxed.
func (g *grader) one(parent context.Context, sub Submission) *report.GradedSubmission {
	started := time.Now()
	a := &attempt{g: g, sub: sub, parent: parent, res: &report.GradedSubmission{
		Student:   sub.Student,
		Source:    sub.Source(),
		Graded:    started.UTC(),
		Outcome:   report.OutcomeGraded,
		MaxPoints: float64(g.o.Lab.MaxPoints()),
	}}
	res := a.res
	// Runs last, after teardown: the wall time of the whole submission.
	defer func() { res.Duration = report.Duration(time.Since(started)) }()
	ctx, cancel := context.WithTimeout(parent, g.o.Timeout)
	defer cancel()

	dir := filepath.Join(g.work, sub.Student)
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return a.failWith(report.OutcomeError, err)
	}
	defer os.RemoveAll(dir)
	g.out.clearLogs(sub.Student)

	project := sub.Dir
	if sub.Repo != "" {
		g.stages.set(sub.Student, "cloning", "")
		t := time.Now()
		commit, err := clone(ctx, g.o.Git, sub, filepath.Join(dir, "src"))
		a.phase("clone", t)
		if err != nil {
			if ctx.Err() != nil {
				return a.stopped("cloning")
			}
			return a.failWith(report.OutcomeError, fmt.Errorf("cannot clone %s: %w", sub.Source(), err))
		}
		res.Commit = commit
		project = filepath.Join(dir, "src")
	}
	if g.hide == nil {
		return a.run(ctx, dir, project, nil)
	}
	// The submission is built and run from a private copy (regular
	// files only), as its own unprivileged user.
	t := time.Now()
	box, err := g.newBox(ctx, dir, sub.Student, project)
	a.phase("copy", t)
	if err != nil {
		if ctx.Err() != nil {
			return a.stopped("copying it")
		}
		return a.failWith(report.OutcomeError, fmt.Errorf("cannot prepare its sandbox: %w", err))
	}
	return g.gradeInBox(ctx, a, dir, box)
}
