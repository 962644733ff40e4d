package grade_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cgroup"
	"github.com/labctl/labctl/internal/cgroup/cgrouptest"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/sandbox"
)

// TestEvilSubmissionCannotCheat grades an evil submission (the reference
// plus every attack on the grader: testdata/grade/evil.patch, and
// unimported packages whose assembler and cgo files #include a file of
// the grader's) beside an honest one. Every attack fails, the evil one
// gets exactly its honest score but for the build its includes break,
// the honest one full marks, and the output directory holds only the
// grader's files.
func TestEvilSubmissionCannotCheat(t *testing.T) {
	needBox(t, "starts a cluster per submission")
	lab := loadLab(t, "lab-8.2")
	root := t.TempDir()
	subs := materialize(t, filepath.Join(root, "class"), []fixture{
		{Student: "honest"},
		{Student: "evil", Patches: []string{"testdata/grade/evil.patch"}},
	}, true)
	out, work := filepath.Join(root, "out"), filepath.Join(root, "work")
	require.NoError(t, os.MkdirAll(work, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(out, grade.FeedbackDir), 0o755))
	cache := userCache(t)
	home, _ := os.UserHomeDir()
	cluster := func(student string, parts ...string) string {
		return filepath.Join(append([]string{work, student, "clusters", "grade"}, parts...)...)
	}

	// A world-readable file that no deny-list names: outside the box's
	// allow-list, it does not exist for the submission.
	bait := filepath.Join("/opt", fmt.Sprintf("labctl-evil-bait-%d", os.Getpid()))
	require.NoError(t, os.MkdirAll(bait, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(bait) })
	require.NoError(t, os.WriteFile(filepath.Join(bait, "notes.txt"), []byte("anyone may read this\n"), 0o644))

	// What the evil manager aims at, wherever the grader keeps it.
	targets := map[string]any{
		"read": []string{
			filepath.Join(bait, "notes.txt"),
			filepath.Join(home, ".kube", "config"),
			filepath.Join(cache, "controlplane"),
			filepath.Join(cache, "managers"),
			filepath.Join(subs[0].Dir, "go.mod"),
			filepath.Join(work, "honest", "sandbox", "src", "go.mod"),
			cluster("honest", "pki", "ca.key"),
			cluster("honest", "kubeconfig"),
			cluster("evil", "pki", "ca.key"),
			cluster("evil", "pki", "admin.key"),
			cluster("evil", "kubeconfig"),
			cluster("evil", "state.json"),
			cluster("evil", "logs", "audit.log"),
			out,
		},
		"write": []string{
			out,
			filepath.Join(out, grade.FeedbackDir),
			filepath.Join(cache, "managers"),
			cluster("evil"),
			cluster("evil", "logs"),
			filepath.Join(work, "honest", "sandbox", "src"),
			work,
			home,
		},
		"kill": []int{os.Getpid()},
		// Places whose very names the box must not learn.
		"mounts": []string{subs[0].Dir, filepath.Join(work, "honest"), out},
		// The grader's network: a TCP listener and an abstract unix
		// socket (what dockerd's is) of this process.
		"dial": []string{graderListener(t, "tcp", "127.0.0.1:0"), graderListener(t, "unix", fmt.Sprintf("@labctl-evil-test-%d", os.Getpid()))},
	}
	raw, err := json.Marshal(targets)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(subs[1].Dir, "evil-targets.json"), raw, 0o644))
	secret, mark := plantIncludes(t, subs[1].Dir, work)
	graderCache := goEnv(t, "GOCACHE")
	started := time.Now()

	s, stdout, _ := iostreams.Test(false)
	stderr := &syncBuffer{}
	s.ErrOut = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	type graded struct {
		gb  *report.Gradebook
		err error
	}
	// Two runs each point TMPDIR and GOTMPDIR at their work dir and put
	// back what they found, which for the later one is the earlier one's:
	// the test restores what it began with.
	t.Setenv("TMPDIR", os.Getenv("TMPDIR"))
	t.Setenv("GOTMPDIR", os.Getenv("GOTMPDIR"))
	first := make(chan graded, 1)
	go func() {
		gb, err := grade.Run(ctx, grade.Options{
			Lab: lab, Submissions: subs, Jobs: 2, Timeout: 6 * time.Minute, OutDir: out,
			Streams: s, Binaries: binaries, WorkDir: work,
		})
		first <- graded{gb, err}
	}()

	// A neighbour whose cluster starts while the evil manager's port trap
	// holds the lower half of the ephemeral range (it starts before the
	// manager is ready, so by "evil: verifying"): graded beside it, it
	// must score what it scores alone, full marks.
	neighbour := materialize(t, filepath.Join(root, "class2"), []fixture{{Student: "neighbour"}}, true)
	for wait := time.Now().Add(5 * time.Minute); time.Now().Before(wait); time.Sleep(200 * time.Millisecond) {
		if out := stderr.String(); strings.Contains(out, "evil: verifying") || strings.Contains(out, "evil: tearing down") {
			break
		}
	}
	s2, _, stderr2 := iostreams.Test(false)
	gb2, err := grade.Run(ctx, grade.Options{
		Lab: lab, Submissions: neighbour, Timeout: 6 * time.Minute, OutDir: filepath.Join(root, "out2"),
		Streams: s2, Binaries: binaries, WorkDir: filepath.Join(root, "work2"),
	})
	t.Logf("neighbour:\n%s", stderr2)
	require.NoError(t, err)
	res := <-first
	gb, err := res.gb, res.err
	t.Logf("%s\n%s", stderr, stdout)
	require.NoError(t, err)
	nb, _ := gb2.Submission("neighbour")
	require.NotNil(t, nb)
	assert.Equal(t, nb.MaxPoints, nb.Score, "the neighbour graded during the port trap scores what it scores alone: %s", nb.Message)

	honest, _ := gb.Submission("honest")
	evil, _ := gb.Submission("evil")
	require.NotNil(t, honest)
	require.NotNil(t, evil)
	assert.Equal(t, report.OutcomeGraded, honest.Outcome, honest.Message)
	for _, sub := range []*report.GradedSubmission{honest, evil} {
		logFailedChecks(t, sub)
	}
	assert.Equal(t, honest.MaxPoints, honest.Score, "the honest submission gets full marks")
	// Its build check compiled in its box, where the grader's file its
	// includes name is not: the build fails, which costs task 1.5 and
	// nothing else.
	builds := findCheck(evil.Report, "project-builds")
	require.NotNil(t, builds, "the build check ran")
	assert.Equal(t, report.Fail, builds.Status, builds.Message)
	assert.Contains(t, builds.Observed, "no such file or directory")
	for _, task := range honest.Tasks {
		got := taskScore(evil, task.ID)
		if task.ID == "1.5" {
			assert.Less(t, got, task.Score, "the evil submission's build fails")
			continue
		}
		assert.Equal(t, task.Score, got, "the evil submission gets its honest score for task %s", task.ID)
	}
	// Nothing it included reached its feedback or any output, and nothing
	// the check compiled reached the grader's build cache.
	require.NoError(t, filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			raw, rerr := os.ReadFile(p)
			require.NoError(t, rerr)
			assert.False(t, strings.Contains(string(raw), secret), "%s quotes the grader's file", p)
		}
		return err
	}))
	assert.Empty(t, cacheEntriesWith(t, graderCache, started, mark), "the build check wrote the submission's packages into the grader's build cache")
	require.NoError(t, os.Remove(filepath.Join(work, secretFileName)), "the work directory is otherwise the grader's to empty")

	// Every attack was tried and failed.
	log := readFile(t, out, grade.LogsDir, "evil", "manager.log")
	attempts := regexp.MustCompile(`(?m)^LABCTL-EVIL (.+): (blocked|SUCCEEDED) \((.*)\)$`).FindAllStringSubmatch(log, -1)
	var succeeded []string
	for _, a := range attempts {
		if a[2] == "SUCCEEDED" {
			succeeded = append(succeeded, a[1]+": "+a[3])
		}
	}
	t.Logf("%d attacks tried, all lines:\n%s", len(attempts), strings.Join(grep(log, "LABCTL-EVIL"), "\n"))
	assert.Empty(t, succeeded, "attacks that worked")
	wantAttempts := len(targets["read"].([]string)) + len(targets["write"].([]string)) + len(targets["dial"].([]string)) + len(targets["mounts"].([]string)) + 2 /* pids */ + 9
	assert.GreaterOrEqual(t, len(attempts), wantAttempts, "every attack ran")
	require.Regexp(t, `LABCTL-EVIL running as uid (\d+)`, log)
	assert.NotContains(t, log, "running as uid 0 ")

	// The output directory holds the grader's files only.
	var files []string
	require.NoError(t, filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out, p)
			files = append(files, rel)
		}
		return err
	}))
	slices.Sort(files)
	assert.Equal(t, []string{
		"feedback/evil.md", "feedback/honest.md", "gradebook.csv", "junit.xml",
		"logs/evil/grade.log", "logs/evil/manager.log", "logs/honest/grade.log", "logs/honest/manager.log",
		"report.html", "results.json",
	}, files)
	for _, d := range []string{filepath.Join(cache, "managers"), home} {
		_, err := os.Stat(filepath.Join(d, "evil-was-here"))
		assert.ErrorIs(t, err, os.ErrNotExist, d)
	}
	requireNothingRunning(t, work)

	// Its port trap ran, in its own network: the honest neighbour's full
	// marks above are the proof it starved no one else.
	assert.Contains(t, log, "LABCTL-EVIL port trap holds")
	// What outlives a process died with its box: SysV objects (its IPC
	// namespace) and files in /run/lock (a private tmpfs).
	assert.Contains(t, log, "LABCTL-EVIL left SysV shm")
	evilUID := sandbox.UIDFor(work + "\x00evil")
	for _, kind := range []string{"shm", "sem", "msg"} {
		assert.NotContains(t, sysvOwners(t, kind), evilUID, "a SysV %s of the evil submission outlived its grading", kind)
	}
	_, err = os.Stat("/run/lock/evil-was-here")
	assert.ErrorIs(t, err, os.ErrNotExist, "a file in /run/lock outlived its grading")

	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"class", "class2", "out", "out2", "work", "work2"}, names, "nothing escaped next to the work directory")
}

// secretFileName is the grader's file (in its work directory) the evil
// submission's includes name.
const secretFileName = "grader-secret.txt"

// plantIncludes adds to the evil submission in dir unimported packages
// (which only the build check compiles) whose assembler and cgo files
// #include a file of the grader's, in its work directory, and one
// marked package. It returns the file's secret and the mark.
func plantIncludes(t *testing.T, dir, work string) (secret, mark string) {
	t.Helper()
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	secret, mark = "LabctlGraderSecret"+nonce, "LabctlEvilCacheMark"+nonce
	file := filepath.Join(work, secretFileName)
	require.NoError(t, os.WriteFile(file, []byte(secret+" is readable by anyone who can see it\n"), 0o644))
	for name, content := range map[string]string{
		"internal/leak/leak.go":   "package leak\n",
		"internal/leak/x.s":       "#include \"" + file + "\"\n",
		"internal/leakc/leakc.go": "package leakc\n\n/*\n#include \"" + file + "\"\n*/\nimport \"C\"\n",
		"internal/mark/mark.go":   "package mark\n\nfunc " + mark + "() {}\n",
	} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return secret, mark
}

// goEnv is a go env variable as the grader's go command sees it.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// cacheEntriesWith lists the files of a Go build cache written since
// since that contain mark.
func cacheEntriesWith(t *testing.T, cache string, since time.Time, mark string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil || info.ModTime().Before(since.Add(-2*time.Second)) {
			return nil // gone (trimmed) or older
		}
		if raw, err := os.ReadFile(p); err == nil && bytes.Contains(raw, []byte(mark)) {
			found = append(found, p)
		}
		return nil
	})
	require.NoError(t, err)
	return found
}

func findCheck(rep *report.Report, id string) *report.CheckResult {
	if rep == nil {
		return nil
	}
	for _, task := range rep.Tasks {
		for _, c := range task.Checks {
			if c.ID == id {
				return c
			}
		}
	}
	return nil
}

func taskScore(sub *report.GradedSubmission, id string) float64 {
	for _, task := range sub.Tasks {
		if task.ID == id {
			return task.Score
		}
	}
	return -1
}

// logFailedChecks says which checks cost a submission points (an honest
// one losing points on a busy machine is a timing check, not an attack).
func logFailedChecks(t *testing.T, sub *report.GradedSubmission) {
	t.Helper()
	if sub.Report == nil {
		return
	}
	for _, task := range sub.Report.Tasks {
		for _, c := range task.Checks {
			if c.Status == report.Fail || c.Status == report.Error {
				t.Logf("%s: task %s check %s: %s: %s", sub.Student, task.ID, c.ID, c.Status, c.Message)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe to read while a run writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// graderListener listens on addr for the test's life and returns its
// address (a unix socket's name as given).
func graderListener(t *testing.T, network, addr string) string {
	t.Helper()
	l, err := net.Listen(network, addr)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if network == "unix" {
		return addr
	}
	return l.Addr().String()
}

// sysvOwners lists the uids owning the machine's SysV objects of a kind
// (shm, sem, msg), from /proc/sysvipc.
func sysvOwners(t *testing.T, kind string) []int {
	t.Helper()
	raw, err := os.ReadFile("/proc/sysvipc/" + kind)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	col := slices.Index(strings.Fields(lines[0]), "uid")
	require.GreaterOrEqual(t, col, 0)
	var uids []int
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > col {
			uid, _ := strconv.Atoi(f[col])
			uids = append(uids, uid)
		}
	}
	return uids
}

func userCache(t *testing.T) string {
	t.Helper()
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		var err error
		base, err = os.UserCacheDir()
		require.NoError(t, err)
	}
	return filepath.Join(base, "labctl")
}

func grep(s, word string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return out
}

// TestHugeSubmissionHoldsNoSlot grades a submission of 30,000 empty files
// under a 5 s limit: copying it stops at the file bound (an error of
// grading: nothing was judged) or at the time limit, within seconds, and
// the result says why.
func TestHugeSubmissionHoldsNoSlot(t *testing.T) {
	needBox(t, "")
	lab := loadLab(t, "lab-8.2")
	root := t.TempDir()
	subs := materialize(t, filepath.Join(root, "class"), []fixture{{Student: "huge"}}, true)
	junk := filepath.Join(subs[0].Dir, "junk")
	require.NoError(t, os.MkdirAll(junk, 0o755))
	for i := range 30_000 {
		f, err := os.Create(filepath.Join(junk, strconv.Itoa(i)))
		require.NoError(t, err)
		f.Close()
	}
	s, _, stderr := iostreams.Test(false)
	start := time.Now()
	gb, err := grade.Run(context.Background(), grade.Options{
		Lab: lab, Submissions: subs, Timeout: 5 * time.Second, OutDir: filepath.Join(root, "out"),
		Streams: s, Binaries: binaries, WorkDir: filepath.Join(root, "work"),
	})
	took := time.Since(start)
	require.NotNil(t, gb, "%v %s", err, stderr)
	sub, _ := gb.Submission("huge")
	require.NotNil(t, sub)
	// The file bound ends it, or on a loaded machine the time limit first.
	if sub.Outcome == report.OutcomeTimeout {
		assert.Contains(t, sub.Message, "while copying it")
	} else {
		assert.Equal(t, report.OutcomeError, sub.Outcome)
		assert.Contains(t, sub.Message, "more than")
	}
	// Seconds, not the minutes it took unbounded (slack for a busy machine).
	assert.Less(t, took, 20*time.Second, "the copy held its slot")
	t.Logf("%s after %s", sub.Message, took.Round(time.Millisecond))
}

// attackEnv makes the test binary an attack on its box's limits: in a
// box ("forkbomb", "hog") it reads its job, then runs itself as the
// student's code would run, sandboxed ("sandboxed-forkbomb", ...).
const attackEnv = "LABCTL_GRADE_TEST_ATTACK"

// maybeAttackBox runs an attack and exits, when the test binary was
// started as one (TestMain calls it before grade.MaybeRun).
func maybeAttackBox() {
	mode := os.Getenv(attackEnv)
	switch {
	case mode == "":
		return
	case strings.HasPrefix(mode, "sandboxed-"):
		cgrouptest.Attack(strings.TrimPrefix(mode, "sandboxed-"))
	}
	if os.Getenv(grade.BoxEnvVar) != "1" {
		return
	}
	// The box's side: the job first (nothing forks before it), then the
	// attack as a submission's command: sandboxed, its own uid.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	self, _ := os.Executable()
	root, err := os.MkdirTemp("", "attack-box-")
	if err != nil {
		fmt.Println("box:", err)
		os.Exit(1)
	}
	box, err := sandbox.NewBox(filepath.Join(root, "box"), sandbox.UIDFor(root), nil)
	if err == nil {
		err = os.MkdirAll(box.Src(), 0o755)
	}
	if err != nil {
		fmt.Println("box:", err)
		os.Exit(1)
	}
	bin := filepath.Join(box.Home(), "attack")
	spec := box.Spec(box.Home(), []string{"PATH=/usr/bin:/bin", attackEnv + "=sandboxed-" + mode}, sandbox.Bind{Src: self, Dst: bin})
	cmd, err := spec.Command([]string{bin, "-test.run=^$"}, nil)
	if err != nil {
		fmt.Println("box:", err)
		os.Exit(1)
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	fmt.Printf("box: the attack ended: %v\n", cmd.Run())
	os.Exit(0)
}

// startAttackBox starts a box, as grading does, whose submission is an
// attack.
func startAttackBox(t *testing.T, mode string, lim cgroup.Limits) (*exec.Cmd, *bufio.Reader, cgroup.Group) {
	t.Helper()
	needBox(t, "")
	if s := cgroup.Detect(); s.Version == 0 {
		t.Skip("no cgroups to limit a box with: " + s.Reason)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, "-test.run=^$")
	// The box's files go where the test cleans up (a killed box cannot).
	cmd.Env = append(os.Environ(), grade.BoxEnvVar+"=1", attackEnv+"="+mode, "TMPDIR="+t.TempDir())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	group, note, err := grade.LaunchBox(cmd, fmt.Sprintf("box-test-%s-%d", mode, os.Getpid()), lim, []byte("{}\n"))
	require.NoError(t, err)
	require.NotNil(t, group, note)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); grade.RemoveBoxGroup(group) })
	return cmd, bufio.NewReader(stdout), group
}

// A fork bomb in a box stops at the box's pids limit, and once the box
// is over its group is gone with every process the bomb made.
func TestForkBombStopsAtTheBoxLimit(t *testing.T) {
	const limit = 128
	cmd, out, group := startAttackBox(t, "forkbomb", cgroup.Limits{Pids: limit})
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	t.Log(strings.TrimSpace(line))
	var n int
	_, err = fmt.Sscanf(line, "forked %d,", &n)
	require.NoError(t, err, line)
	assert.Contains(t, line, "resource temporarily unavailable", "fork failed for the limit")
	assert.Less(t, n, limit, "the box's own processes and threads count too")

	dir := group.Path()
	pids := cgroup.Pids(dir)
	assert.Greater(t, len(pids), n, "the box (its labctl, the sandbox, the bomb) is in the group")
	// By pid and start time: a pid reused meanwhile is another process.
	var procs []proc.Record
	for _, pid := range pids {
		if st, err := proc.StartTime(pid); err == nil {
			procs = append(procs, proc.Record{PID: pid, Start: st})
		}
	}
	// As startBox ends a box past its time: the child killed, the group
	// removed with whatever is left in it.
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	grade.RemoveBoxGroup(group)
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "the box's group is gone")
	// The kernel takes a killed process out of its group a moment before
	// it becomes a zombie (cgroup_exit, then exit_notify): on a busy
	// machine the group can be gone while a killed process still finishes
	// exiting, running no code of its own. It gets a moment, not more.
	gone := time.Now()
	deadline := gone.Add(10 * time.Second)
	for _, p := range procs {
		for p.Alive() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		assert.False(t, p.Alive(), "process %d outlived its box by 10s", p.PID)
	}
	if d := time.Since(gone); d > 20*time.Millisecond {
		t.Logf("the last killed process finished exiting %s after its group was gone", d.Round(time.Millisecond))
	}
}

// Memory beyond a box's limit is killed inside the box: the attack dies,
// the box's labctl lives on to report it, the grader never notices.
func TestMemoryHogIsKilledInItsBoxOnly(t *testing.T) {
	const limit = 192 << 20
	cmd, out, group := startAttackBox(t, "hog", cgroup.Limits{Memory: limit})
	var last, verdict string
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(line, "box: ") {
			verdict = strings.TrimSpace(line)
		} else {
			last = strings.TrimSpace(line)
		}
	}
	require.NoError(t, cmd.Wait(), "the box's labctl survived")
	t.Logf("%s; %s", last, verdict)
	assert.Equal(t, "box: the attack ended: signal: killed", verdict)
	held, _ := strconv.Atoi(strings.Fields(last + " 0 0")[1])
	assert.Less(t, held, limit>>20, "it never held more than the box's limit")
	assert.GreaterOrEqual(t, group.OOMKills(), 1, "the kernel's OOM killer ended it")
}
