//go:build unix

package grade

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/sandbox"
)

func TestNewWorkDirIsPrivateAndOwned(t *testing.T) {
	root := filepath.Join(t.TempDir(), "grade")
	dir, err := newWorkDir(root)
	require.NoError(t, err)
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "keys and kubeconfigs: the grader's alone")
	assert.True(t, strings.HasPrefix(filepath.Base(dir), runPrefix))
	owner, err := readOwner(dir)
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), owner.PID)
	assert.True(t, owner.Alive())
	assert.Empty(t, staleRuns(root, time.Now()), "a live grader's directory is not stale")
}

// deadRecord names this process's pid with another start time: a grader
// that is gone and whose pid was reused.
func deadRecord(t *testing.T) proc.Record {
	st, err := proc.StartTime(os.Getpid())
	require.NoError(t, err)
	return proc.Record{PID: os.Getpid(), Start: st + 1}
}

func makeRun(t *testing.T, root, name string, owner *proc.Record) string {
	t.Helper()
	dir := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "alice", "src"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alice", "src", "main.go"), make([]byte, 3000), 0o644))
	if owner != nil {
		require.NoError(t, proc.SaveRecord(filepath.Join(dir, ownerFile), *owner))
	}
	return dir
}

func TestStaleRuns(t *testing.T) {
	root := t.TempDir()
	now := time.Now()
	dead := deadRecord(t)
	st, _ := proc.StartTime(os.Getpid())
	alive := proc.Record{PID: os.Getpid(), Start: st}

	deadRun := makeRun(t, root, "run-dead", &dead)
	makeRun(t, root, "run-alive", &alive)
	makeRun(t, root, "run-new", nil) // its grader is about to write the record
	oldUnowned := makeRun(t, root, "run-old", nil)
	old := now.Add(-2 * unownedGrace)
	require.NoError(t, os.Chtimes(oldUnowned, old, old))
	makeRun(t, root, "not-a-run", &dead) // not ours to judge
	require.NoError(t, os.WriteFile(filepath.Join(root, ".clean.lock"), nil, 0o644))

	assert.ElementsMatch(t, []string{deadRun, oldUnowned}, staleRuns(root, now))
}

func TestCleanStaleRemovesDeadRunsOnly(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "no-kubeconfig"))
	root := t.TempDir()
	dead := deadRecord(t)
	deadRun := makeRun(t, root, "run-dead", &dead)
	liveRun, err := newWorkDir(root)
	require.NoError(t, err)

	c, err := CleanStale(context.Background(), root)
	require.NoError(t, err)
	assert.Equal(t, []string{deadRun}, c.Runs)
	assert.Equal(t, []int{dead.PID}, c.Owners)
	assert.GreaterOrEqual(t, c.Bytes, int64(3000))
	assert.Empty(t, c.Problems)
	assert.NoDirExists(t, deadRun)
	assert.DirExists(t, liveRun)
	assert.Regexp(t, `^note: cleaned up 1 grading run\(s\) left by a grader that is gone \(pid \d+\): stopped their clusters and managers, removed \d+ kB from `+root+`$`, c.String())

	again, err := CleanStale(context.Background(), root)
	require.NoError(t, err)
	assert.Empty(t, again.Runs)
	assert.Empty(t, again.String(), "nothing cleaned, nothing said")
}

func TestCleanStaleMissingRoot(t *testing.T) {
	c, err := CleanStale(context.Background(), filepath.Join(t.TempDir(), "never-graded"))
	require.NoError(t, err)
	assert.Empty(t, c.Runs)
}

// startSleeper starts a process that would outlive its dead grader.
func startSleeper(t *testing.T, cred *syscall.Credential) (*exec.Cmd, proc.Record) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	st, err := proc.StartTime(cmd.Process.Pid)
	require.NoError(t, err)
	return cmd, proc.Record{PID: cmd.Process.Pid, Start: st}
}

// exited waits for cmd to end (it must have been stopped by now: a
// stopped process's pidfd is readable, so Wait returns at once).
func exited(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		assert.Error(t, err, "killed, not finished")
	case <-time.After(10 * time.Second):
		t.Fatalf("process %d is still running", cmd.Process.Pid)
	}
}

func TestCleanStaleStopsRecordedSupervisors(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "no-kubeconfig"))
	root := t.TempDir()
	dead := deadRecord(t)
	run := makeRun(t, root, "run-dead", &dead)
	// A manager's supervisor, recorded in the submission's cluster state
	// as `labctl up` records it.
	opDir := filepath.Join(run, "alice", "clusters", clusterName, "operators", "postgres-operator")
	require.NoError(t, os.MkdirAll(opDir, 0o755))
	cmd, rec := startSleeper(t, nil)
	require.NoError(t, proc.SaveRecord(filepath.Join(opDir, proc.SupervisorRecord), rec))

	c, err := CleanStale(context.Background(), root)
	require.NoError(t, err)
	assert.Empty(t, c.Problems)
	assert.Equal(t, []string{run}, c.Runs)
	exited(t, cmd)
	assert.NoDirExists(t, run)
}

func TestCleanStaleKillsSandboxUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as a sandbox's uid")
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "no-kubeconfig"))
	root := t.TempDir()
	require.NoError(t, os.Chmod(root, 0o755))
	dead := deadRecord(t)
	run := makeRun(t, root, "run-dead", &dead)
	require.NoError(t, os.MkdirAll(filepath.Join(run, "alice", "sandbox"), 0o755))
	// The uid the dead grader gave alice's sandbox (see newBox).
	uid := uint32(sandbox.UIDFor(run + "\x00alice"))
	cmd, _ := startSleeper(t, &syscall.Credential{Uid: uid, Gid: uid})

	c, err := CleanStale(context.Background(), root)
	require.NoError(t, err)
	assert.Empty(t, c.Problems)
	assert.Equal(t, 1, c.Killed)
	assert.Contains(t, c.String(), "killed 1 leftover process(es)")
	exited(t, cmd)
	assert.NoDirExists(t, run)
}

func TestUseTempDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work", tempDirName)
	shared := t.TempDir()
	t.Setenv("TMPDIR", shared)
	t.Setenv("GOTMPDIR", "") // restored after the test
	require.NoError(t, os.Unsetenv("GOTMPDIR"))
	restore, err := useTempDir(dir)
	require.NoError(t, err)
	assert.Equal(t, dir, os.TempDir(), "the grader's own temporary files")
	assert.Equal(t, dir, os.Getenv("GOTMPDIR"), "go builds it starts")
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())
	restore()
	assert.Equal(t, shared, os.Getenv("TMPDIR"))
	_, set := os.LookupEnv("GOTMPDIR")
	assert.False(t, set)
}

func TestCleanedString(t *testing.T) {
	c := Cleaned{Runs: []string{"/s/labctl/grade/run-1", "/s/labctl/grade/run-2"}, Owners: []int{41, 0}, Bytes: 123 << 20, Killed: 2}
	assert.Equal(t, "note: cleaned up 2 grading run(s) left by a grader that is gone (pid 41): stopped their clusters and managers, killed 2 leftover process(es), removed 123 MB from /s/labctl/grade", c.String())
	p := Cleaned{Problems: []string{"cannot stop kube-apiserver (pid 7): no"}}
	assert.Equal(t, "warning: could not clean up after a dead grader: cannot stop kube-apiserver (pid 7): no", p.String())
}
