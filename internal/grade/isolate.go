package grade

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/supervise"
)

// A sandboxed submission's cluster, build, manager and checks run in a
// child labctl (this executable re-executed with boxEnvVar set) that
// lives in network, IPC and UTS namespaces of its own. Its network
// namespace has only a loopback interface: the cluster's ports (etcd,
// API server, ...) and the manager's are bound there, so no other
// submission can bind, steal or exhaust them, reach them, or reach the
// machine's (dockerd's abstract socket included). The IPC namespace takes
// the submission's SysV shared memory, semaphores and message queues
// with it when its last process ends.
//
// The child is the grader (root, trusted): it reads the job on stdin and
// writes JSON lines on stdout, stage changes as it goes and the result
// last. Everything the submission supplies it still runs through the
// sandbox (an unprivileged user, mount and pid namespaces).
const boxEnvVar = "LABCTL_GRADE_BOX"

// boxJob is what the child needs: the run's options that can cross a
// process boundary, and the attempt so far.
type boxJob struct {
	Lab                 *labs.Lab                `json:"lab"`
	Sub                 Submission               `json:"sub"`
	Result              *report.GradedSubmission `json:"result"`
	Deadline            time.Time                `json:"deadline"`
	Timeout             time.Duration            `json:"timeout"`
	ManagerReadyTimeout time.Duration            `json:"managerReadyTimeout"`
	Limits              supervise.Limits         `json:"limits"`
	Lang                string                   `json:"lang"`
	Credit              Credit                   `json:"credit"`
	Go                  string                   `json:"go"`
	Binaries            *controlplane.Binaries   `json:"binaries,omitempty"`
	OutDir              string                   `json:"outDir"`
	Work                string                   `json:"work"`
	Dir                 string                   `json:"dir"`
	Box                 *sandbox.Box             `json:"box"`
	Checks              int                      `json:"checks"`
}

// boxMessage is one line from the child.
type boxMessage struct {
	Stage  string                   `json:"stage,omitempty"`
	Detail *string                  `json:"detail,omitempty"`
	Result *report.GradedSubmission `json:"result,omitempty"`
	// Interrupted: the run was cancelled; nothing to record.
	Interrupted bool `json:"interrupted,omitempty"`
}

// MaybeRun grades one submission in its box and exits, when this process
// was started to (programs that grade call it first thing in main or
// TestMain, after supervise.MaybeRun).
func MaybeRun() {
	if os.Getenv(boxEnvVar) != "1" {
		return
	}
	os.Exit(runBox(os.Stdin, os.Stdout))
}

func runBox(in io.Reader, out io.Writer) int {
	var job boxJob
	if err := json.NewDecoder(in).Decode(&job); err != nil {
		fmt.Fprintln(os.Stderr, "labctl grade box: bad job:", err)
		return 2
	}
	if err := loopbackUp(); err != nil {
		fmt.Fprintln(os.Stderr, "labctl grade box: cannot bring up the loopback interface:", err)
		return 3
	}
	denyGitFetches()
	// The grader ends the box with SIGTERM when its run is interrupted:
	// this attempt then tears down and reports nothing.
	parent, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithDeadline(parent, job.Deadline)
	defer cancel()

	enc := &boxWriter{enc: json.NewEncoder(out)}
	g := &grader{
		o: Options{
			Lab: job.Lab, Timeout: job.Timeout, ManagerReadyTimeout: job.ManagerReadyTimeout,
			Limits: job.Limits, Lang: job.Lang, Credit: job.Credit, Go: job.Go, Verify: checks.Run,
		},
		out:    &outputs{dir: job.OutDir},
		work:   job.Work,
		checks: job.Checks,
		stages: enc,
		hide:   job.Box.Hide,
	}
	if job.Binaries != nil {
		bins := *job.Binaries
		g.o.Binaries = func(context.Context, *iostreams.IOStreams) (*controlplane.Binaries, error) { return &bins, nil }
	}
	a := &attempt{g: g, sub: job.Sub, parent: parent, res: job.Result}
	res := a.run(ctx, job.Dir, job.Box.Src(), job.Box)
	if res == nil {
		enc.send(boxMessage{Interrupted: true})
		return 0
	}
	enc.send(boxMessage{Result: res})
	return 0
}

// denyGitFetches makes every git this box's grader starts refuse to
// fetch, over any protocol, local paths included. The submission's
// kustomization is rendered in its sandbox (render.Boxed), where there is
// no git at all; this stays as a second wall, should anything of the
// grader's ever run git on the submission's behalf.
func denyGitFetches() {
	for k, v := range map[string]string{"GIT_ALLOW_PROTOCOL": "none", "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"} {
		_ = os.Setenv(k, v)
	}
}

// boxWriter sends the child's messages, one JSON line each.
type boxWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *boxWriter) send(m boxMessage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(m)
}

func (w *boxWriter) set(_, stage, detail string) {
	w.send(boxMessage{Stage: stage, Detail: &detail})
}

func (w *boxWriter) detail(_, detail string) { w.send(boxMessage{Detail: &detail}) }

// boxGrace is how long a box has, past its submission's time limit, to
// tear its cluster down (teardown's own bound) before it is killed.
const boxGrace = 90 * time.Second

// gradeInBox runs the rest of a's grading (cluster, build, manager,
// checks) in a child labctl in namespaces of its own (see boxEnvVar).
// The box's failures that are the grader's (it could not start, it
// died) are retried once and then reported as errors of grading, never
// as the student's.
func (g *grader) gradeInBox(ctx context.Context, a *attempt, dir string, box *sandbox.Box) *report.GradedSubmission {
	bins, err := g.binaries()
	if err != nil {
		return a.failWith(report.OutcomeError, err)
	}
	prefetchModules(ctx, g.o.Go, box.Src())
	res, err := g.startBox(ctx, a, dir, box, bins)
	if graderFailed(res, err) && ctx.Err() == nil && a.parent.Err() == nil {
		first := err
		if first == nil {
			first = errors.New(res.Message)
		}
		// The second attempt starts on a fresh cluster: the first box's
		// (its processes died with its group) may be half-written, and
		// restarting it would carry the first attempt's objects over.
		if rerr := os.RemoveAll(clustersDir(dir)); rerr != nil {
			return a.failWith(report.OutcomeError, fmt.Errorf("the grader failed (not the submission): %w; and clearing its cluster for a second attempt: %w", first, rerr))
		}
		res, err = g.startBox(ctx, a, dir, box, bins)
		if res != nil {
			res.Notes = append(res.Notes, "graded a second time: the first attempt failed on the grader's side ("+first.Error()+")")
		}
	}
	switch {
	case a.parent.Err() != nil:
		return nil
	case err != nil && ctx.Err() != nil:
		return a.stopped("grading it")
	case err != nil:
		return a.failWith(report.OutcomeError, fmt.Errorf("the grader failed (not the submission): %w", err))
	}
	*a.res = *res
	return a.res
}

// graderFailed says whether an attempt ended for a reason of the
// grader's (its box died, a port or the disk failed its cluster): an
// error outcome, never a verdict on the submission.
func graderFailed(res *report.GradedSubmission, err error) bool {
	return err != nil || (res != nil && res.Outcome == report.OutcomeError)
}

// startBox runs one box to its end: its result, nil when interrupted, or
// why the box itself failed.
func (g *grader) startBox(ctx context.Context, a *attempt, dir string, box *sandbox.Box, bins *controlplane.Binaries) (*report.GradedSubmission, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	job := boxJob{
		Lab: g.o.Lab, Sub: a.sub, Result: a.res, Deadline: deadline, Timeout: g.o.Timeout,
		ManagerReadyTimeout: g.o.ManagerReadyTimeout, Limits: g.o.Limits, Lang: g.o.Lang, Credit: g.o.Credit, Go: g.o.Go,
		Binaries: bins, OutDir: g.out.dir, Work: g.work, Dir: dir, Box: box, Checks: g.checks,
	}
	raw, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), boxEnvVar+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = boxProcAttr()
	group, note, err := launchBox(cmd, boxGroupName(a.sub.Student, box.Root), g.boxLimits, raw)
	if err != nil {
		return nil, err
	}
	// Whatever the box left (its cluster, a manager's orphans) dies with
	// its group.
	defer removeGroup(group)
	// Interrupted: the box tears down and says so. Past the time limit
	// and teardown's grace: killed.
	done := make(chan struct{})
	go func() {
		select {
		case <-a.parent.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case <-done:
			return
		}
		select {
		case <-time.After(boxGrace):
			_ = cmd.Process.Kill()
		case <-done:
		}
	}()
	hard := time.AfterFunc(time.Until(deadline)+boxGrace, func() { _ = cmd.Process.Kill() })
	defer hard.Stop()

	var res *report.GradedSubmission
	interrupted := false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		var m boxMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch {
		case m.Result != nil:
			res = m.Result
		case m.Interrupted:
			interrupted = true
		case m.Stage != "":
			g.stages.set(a.sub.Student, m.Stage, *m.Detail)
		case m.Detail != nil:
			g.stages.detail(a.sub.Student, *m.Detail)
		}
	}
	werr := cmd.Wait()
	close(done)
	switch {
	case interrupted:
		return nil, nil
	case res != nil:
		if note != "" {
			res.Notes = append(res.Notes, note)
		}
		return res, nil
	case werr == nil:
		werr = errors.New("it reported no result")
	}
	msg := lastLine(stderr.String())
	if msg == "" {
		msg = werr.Error()
	}
	return nil, fmt.Errorf("its box ended early: %s%s", msg, boxEndedNote(group, g.boxLimits))
}

// prefetchModules downloads the modules the project's go.mod names,
// while the grader still has the network (a box has none), the way the
// box's build does (deploy.DownloadModules: no VCS, no directory outside
// the copy, checksums verified); its errors are the build's to report,
// offline, in the box.
func prefetchModules(ctx context.Context, goCmd, dir string) {
	if _, err := os.Stat(dir + "/go.mod"); err != nil {
		return
	}
	_ = deploy.DownloadModules(ctx, goCmd, dir)
}

func lastLine(s string) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	return string(lines[len(lines)-1])
}
