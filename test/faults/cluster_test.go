//go:build linux

package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/testproject"
)

// clusterFaults meet a real local cluster: the shared one, or their own
// when the fault breaks it.
var clusterFaults = []struct {
	name string
	run  func(t *testing.T)
}{
	{"up reuses the running cluster and its hint runs as typed", upReusesAndHints},
	{"commands follow the current labctl context", followsCurrentContext},
	{"status shows the running cluster", statusShowsShared},
	{"verify accepts --lang EN", verifyLangUpperCase},
	{"Ctrl-C during verify: 130, not judged, namespace removed", interruptVerify},
	{"a manager that crashes at start: its panic quoted, nothing left running", crashingManager},
	{"a project that does not compile: the compiler's first error", brokenBuild},
	{"a redeploy whose manager crashes: the working one keeps running", crashingRedeploy},
	{"API server killed mid-verify: exit 1, not judged; next verify removes the namespace", apiserverKilled},
	{"two ups at once: both succeed, one manager", concurrentUps},
	{"down with a corrupt KUBECONFIG still removes the cluster", downCorruptKubeconfig},
	{"Ctrl-C during up leaves nothing", interruptUp},
	{"a component that dies at start-up: one line, nothing left, stale context gone", failedUp},
	{"disk full: exit 4 with the space needed", diskFull},
	{"HOME unset and no home in the user database: refused, exit 4", homeless},
	{"grader killed: next grade cleans up, nothing in $TMPDIR", graderKilled},
}

func TestClusterFaults(t *testing.T) {
	start := time.Now()
	for _, c := range clusterFaults {
		t.Run(c.name, c.run)
	}
	t.Logf("cluster faults took %s", time.Since(start).Round(time.Second))
}

// --- on the shared cluster -------------------------------------------

func upReusesAndHints(t *testing.T) {
	s := sharedEnv(t)
	e := s.caseEnv(t)
	r := e.run(t, "up", "--provider", "local", "--name", s.name, "--no-operator")
	require.Equal(t, 0, r.code, "%s", r)
	checkStderr(t, r, `already running`, false)
	assert.Contains(t, r.stdout, "kubectl context labctl-"+s.name)
	// labctl is not on PATH here: the hint names the binary itself, with
	// the flag that picks this cluster.
	line := ""
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "next: ") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "next: "))
		}
	}
	require.NotEmpty(t, line, "%s", r)
	// a new user (no lab passed yet) is pointed at the Database operator's first lab
	assert.Equal(t, labctl+" verify lab-3.2 --name "+s.name, line)
	assert.Equal(t, []string{"labctl-" + s.name}, labctlContexts(e.kubeconfig))
	assert.Empty(t, e.leftovers(s.name))
}

func followsCurrentContext(t *testing.T) {
	s := sharedEnv(t)
	e := s.caseEnv(t)
	r := e.run(t, "up", "--provider", "local", "--name", s.name, "--no-operator")
	require.Equal(t, 0, r.code, "%s", r)
	// no --name: the current context labctl-faults names the cluster
	r = e.run(t, "verify", lab, "--task", "1.1")
	assert.Contains(t, []int{0, 3}, r.code, "verify ran\n%s", r)
	assert.Contains(t, r.stderr+r.stdout, "cluster "+s.name, "%s", r)
	checkStderr(t, r, "", false)
	assert.Empty(t, e.leftovers(s.name))
}

func statusShowsShared(t *testing.T) {
	s := sharedEnv(t)
	e := s.caseEnv(t)
	r := e.run(t, "status", "--provider", "local")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Regexp(t, `local cluster `+s.name+` \(context labctl-`+s.name+`\): running`, r.stdout)
	assert.Regexp(t, `manager`, r.stdout, "the reference operator runs")
	assert.Empty(t, e.leftovers(s.name))
}

func verifyLangUpperCase(t *testing.T) {
	s := sharedEnv(t)
	e := s.caseEnv(t)
	r := e.run(t, "verify", lab, "--name", s.name, "--task", "1.1", "--lang", "EN")
	assert.Contains(t, []int{0, 3}, r.code, "verify ran\n%s", r)
	checkStderr(t, r, "", false)
	assert.Empty(t, e.leftovers(s.name))
}

func interruptVerify(t *testing.T) {
	s := sharedEnv(t)
	e := s.caseEnv(t)
	before := labctlNamespaces(t, s.adminKubeconfig())
	markers := filepath.Join(e.clustersDir(), s.name, "verify-namespaces")
	require.NoError(t, os.MkdirAll(markers, 0o755))
	seen := map[string]bool{}
	entries, _ := os.ReadDir(markers)
	for _, ent := range entries {
		seen[ent.Name()] = true
	}

	r := e.start(t, "verify", lab, "--name", s.name)
	marker := waitForNewFile(t, markers, seen, r.done)
	// interrupt once the run has made its namespace: there is work to undo
	cfg, err := clientcmd.BuildConfigFromFlags("", s.adminKubeconfig())
	require.NoError(t, err)
	_, err = kube.WaitFor(context.Background(), cfg, corev1.SchemeGroupVersion.WithResource("namespaces"), "", marker, time.Minute, kube.Exists)
	require.NoError(t, err)
	signal(t, r, syscall.SIGINT)
	res := r.wait(t, 2*time.Minute)
	assert.Equal(t, 130, res.code, "%s", res)
	checkStderr(t, res, `^interrupted: the tasks were not run to the end and are not judged`, false)
	assert.NotContains(t, res.stdout, "✗", "no task is marked failed\n%s", res)
	assert.NotContains(t, res.stdout, "FAIL", "%s", res)
	assert.ElementsMatch(t, before, labctlNamespaces(t, s.adminKubeconfig()), "the run's namespace is deleted")
	_, err = os.Stat(filepath.Join(markers, marker))
	assert.ErrorIs(t, err, os.ErrNotExist, "its marker too")
	assert.Empty(t, e.leftovers(s.name))
}

// waitForNewFile waits for a file in dir that is not in seen.
func waitForNewFile(t *testing.T, dir string, seen map[string]bool, done <-chan struct{}) string {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	require.NoError(t, err)
	defer unix.Close(fd)
	_, err = unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE)
	require.NoError(t, err)
	deadline := time.Now().Add(3 * time.Minute)
	buf := make([]byte, 4096)
	for {
		entries, _ := os.ReadDir(dir)
		for _, ent := range entries {
			if !seen[ent.Name()] {
				return ent.Name()
			}
		}
		select {
		case <-done:
			t.Fatalf("the command ended before a file appeared in %s", dir)
		default:
		}
		left := time.Until(deadline)
		require.Positive(t, left, "no new file in %s", dir)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		_, _ = unix.Poll(pfd, int(min(left, time.Second).Milliseconds()))
		_, _ = unix.Read(fd, buf)
	}
}

// crasherProject is a kubebuilder-shaped project whose manager panics at
// start (a nil map), as a student's sometimes does.
func crasherProject(t *testing.T, dir string) {
	require.NoError(t, testproject.Write(dir, "crasher", testproject.Crashes))
}

func crashingManager(t *testing.T) {
	s := sharedEnv(t)
	e := s.caseEnv(t)
	project := filepath.Join(e.root, "crasher")
	crasherProject(t, project)
	managersBefore := procsUnder(filepath.Join(e.clustersDir(), s.name, "operators"))

	r := e.run(t, "up", "--provider", "local", "--name", s.name, "--project", project)
	assert.Equal(t, 1, r.code, "%s", r)
	checkStderr(t, r, `^error: the manager did not become ready: it exited during start-up; its log says: panic: assignment to entry in nil map: see .*manager.log`, false)
	for pid, cmd := range procsUnder(filepath.Join(e.clustersDir(), s.name, "operators", "crasher")) {
		t.Errorf("the crashing manager is still running: %d %s", pid, cmd)
	}
	managersAfter := procsUnder(filepath.Join(e.clustersDir(), s.name, "operators"))
	for pid := range managersBefore {
		if _, ok := managersAfter[pid]; !ok {
			t.Errorf("the reference operator (pid %d) was stopped by another project's failed start", pid)
		}
	}
	assert.Empty(t, e.leftovers(s.name))
}

// crashingRedeploy redeploys a working project with a change that crashes
// at start: the new manager starts beside the old one, and the old one is
// replaced only once the new one is ready, so it keeps serving.
func crashingRedeploy(t *testing.T) {
	s := sharedEnv(t)
	e := s.caseEnv(t)
	project := filepath.Join(e.root, "swapper")
	require.NoError(t, testproject.Write(project, "swapper", testproject.Ready))
	operators := filepath.Join(e.clustersDir(), s.name, "operators")
	t.Cleanup(func() {
		for _, r := range proc.LoadRecords(filepath.Join(operators, "swapper*", proc.SupervisorRecord)) {
			_ = proc.StopRecord(context.Background(), r, 10*time.Second)
		}
	})

	r := e.run(t, "up", "--provider", "local", "--name", s.name, "--project", project)
	require.Equal(t, 0, r.code, "%s", r)
	working := procsUnder(filepath.Join(operators, "swapper"))
	require.NotEmpty(t, working, "the working manager runs")

	require.NoError(t, testproject.SetMain(project, testproject.Crashes))
	r = e.run(t, "up", "--provider", "local", "--name", s.name, "--project", project)
	assert.Equal(t, 1, r.code, "%s", r)
	checkStderr(t, r, `^error: the manager did not become ready: it exited during start-up; its log says: panic: assignment to entry in nil map \(the operator deployed before keeps running\): see .*manager.log`, false)
	assert.Equal(t, working, procsUnder(filepath.Join(operators, "swapper")), "the working manager keeps running, the crashing one is stopped")
	assert.Empty(t, e.leftovers(s.name))
}

func brokenBuild(t *testing.T) {
	s := sharedEnv(t)
	e := s.caseEnv(t)
	project := filepath.Join(e.root, "broken")
	require.NoError(t, testproject.Write(project, "broken", "package main\n\nfunc main() { undefinedThing() }\n"))
	r := e.run(t, "up", "--provider", "local", "--name", s.name, "--project", project)
	assert.Equal(t, 1, r.code, "%s", r)
	checkStderr(t, r, `^error: the project in .*/broken does not build: cmd/main.go:3:15: undefined: undefinedThing: run `+"`go build ./...`", false)
	assert.Empty(t, procsUnder(filepath.Join(e.clustersDir(), s.name, "operators", "broken")))
	assert.Empty(t, e.leftovers(s.name))
}

// --- clusters of their own -------------------------------------------

// ownEnv is a world for a case that starts (and breaks) its own cluster.
func ownEnv(t *testing.T) *env {
	e := newEnv(t)
	e.binDir = controlPlane(t)
	e.cache = suiteCache()
	return e
}

func up(t *testing.T, e *env, name string, extra ...string) {
	t.Helper()
	r := e.run(t, append([]string{"up", "--provider", "local", "--name", name}, extra...)...)
	require.Equal(t, 0, r.code, "%s", r)
}

func down(t *testing.T, e *env, name string) {
	t.Helper()
	r := e.run(t, "down", "--name", name)
	require.Equal(t, 0, r.code, "%s", r)
}

func apiserverKilled(t *testing.T) {
	e := ownEnv(t)
	const name = "killed"
	up(t, e, name)
	t.Cleanup(func() { _ = e.run(t, "down", "--name", name) })
	dir := filepath.Join(e.clustersDir(), name)
	markers := filepath.Join(dir, "verify-namespaces")
	require.NoError(t, os.MkdirAll(markers, 0o755))

	r := e.start(t, "verify", lab, "--name", name)
	ns := waitForNewFile(t, markers, map[string]bool{}, r.done)
	// kill it once the run's namespace exists, so something is left
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	require.NoError(t, err)
	_, err = kube.WaitFor(context.Background(), cfg, corev1.SchemeGroupVersion.WithResource("namespaces"), "", ns, time.Minute, kube.Exists)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pidOf(t, dir, "kube-apiserver"), syscall.SIGKILL))
	res := r.wait(t, 3*time.Minute)
	assert.Equal(t, 1, res.code, "%s", res)
	checkStderr(t, res, `^error: the cluster stopped answering during verify \(the API server does not answer: .*\); the tasks were not judged: `+"`labctl status`", false)
	assert.NotContains(t, res.stdout, "✗", "no task is marked failed\n%s", res)

	// The namespace outlives the API server in etcd; once the cluster is
	// back, the next verify deletes it.
	up(t, e, name)
	stale := labctlNamespaces(t, filepath.Join(dir, "kubeconfig"))
	require.Contains(t, stale, ns, "the dead run's namespace came back with etcd's data")
	r2 := e.run(t, "verify", lab, "--name", name, "--task", "1.1")
	assert.Contains(t, []int{0, 3}, r2.code, "%s", r2)
	after := labctlNamespaces(t, filepath.Join(dir, "kubeconfig"))
	for _, ns := range stale {
		assert.NotContains(t, after, ns, "the dead run's namespace is deleted")
	}
	down(t, e, name)
	assert.Empty(t, e.leftovers())
}

func concurrentUps(t *testing.T) {
	e := ownEnv(t)
	const name = "twice"
	t.Cleanup(func() { _ = e.run(t, "down", "--name", name) })
	args := []string{"up", "--provider", "local", "--name", name}
	first, second := e.start(t, args...), e.start(t, args...)
	r1, r2 := first.wait(t, 8*time.Minute), second.wait(t, 8*time.Minute)
	assert.Equal(t, 0, r1.code, "%s", r1)
	assert.Equal(t, 0, r2.code, "%s", r2)
	var managers []string
	for pid, cmd := range procsUnder(filepath.Join(e.clustersDir(), name, "operators")) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); filepath.Base(exe) == "manager" {
			managers = append(managers, fmt.Sprintf("%d %s", pid, cmd))
		}
	}
	assert.Len(t, managers, 1, "one manager runs: %v", managers)
	down(t, e, name)
	assert.Empty(t, e.leftovers())
}

func downCorruptKubeconfig(t *testing.T) {
	e := ownEnv(t)
	const name = "corrupt"
	up(t, e, name, "--no-operator")
	writeFile(t, e.kubeconfig, "{{{ not yaml", 0o600)
	r := e.run(t, "down", "--name", name)
	assert.Equal(t, 0, r.code, "%s", r)
	checkStderr(t, r, `(?m)^warning: the cluster is deleted, but its context labctl-corrupt is still in your kubeconfig`, false)
	assert.Empty(t, procsUnder(e.root), "no process of the cluster runs")
	_, err := os.Stat(filepath.Join(e.clustersDir(), name))
	assert.ErrorIs(t, err, os.ErrNotExist, "its state is removed")
	assert.Empty(t, e.leftovers())
}

func interruptUp(t *testing.T) {
	e := ownEnv(t)
	const name = "halfway"
	require.NoError(t, os.MkdirAll(e.clustersDir(), 0o755))
	r := e.start(t, "up", "--provider", "local", "--name", name, "--no-operator")
	// the cluster's directory appears once binaries are found and files
	// are being written: interrupt the start-up there
	waitForFile(t, filepath.Join(e.clustersDir(), name), time.Minute, r.done)
	signal(t, r, syscall.SIGINT)
	res := r.wait(t, 2*time.Minute)
	assert.Equal(t, 130, res.code, "%s", res)
	checkStderr(t, res, `^interrupted$`, false)
	assert.Empty(t, e.leftovers())
}

func failedUp(t *testing.T) {
	e := ownEnv(t)
	const name = "dies"
	// a bin dir whose etcd dies at once
	bins := filepath.Join(e.root, "bins")
	require.NoError(t, os.MkdirAll(bins, 0o755))
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		require.NoError(t, os.Symlink(filepath.Join(e.binDir, c), filepath.Join(bins, c)))
	}
	writeFile(t, filepath.Join(bins, "etcd"), "#!/bin/sh\necho 'panic: cannot open the data directory' >&2\necho 'goroutine 1 [running]:' >&2\nexit 2\n", 0o755)
	// a context left by an earlier cluster of that name
	writeFile(t, e.kubeconfig, staleContext, 0o600)
	r := e.run(t, "up", "--provider", "local", "--name", name, "--no-operator", "--bin-dir", bins)
	assert.Equal(t, 1, r.code, "%s", r)
	checkStderr(t, r, `^error: etcd exited during start-up \(exit status 2\): panic: cannot open the data directory: run the same `+"`labctl up`"+` with -v to see the end of its log$`, false)
	assert.Empty(t, e.leftovers())
}

const staleContext = `apiVersion: v1
kind: Config
clusters:
- name: labctl-dies
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: labctl-dies
  context: {cluster: labctl-dies, user: labctl-dies}
users:
- name: labctl-dies
  user: {token: stale}
current-context: labctl-dies
`

func diskFull(t *testing.T) {
	e := ownEnv(t)
	small := filepath.Join(e.root, "small")
	require.NoError(t, os.MkdirAll(small, 0o755))
	if err := unix.Mount("tmpfs", small, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v); needs root", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(small, unix.MNT_DETACH) })
	e.state = small
	r := e.run(t, "up", "--provider", "local", "--name", "full", "--no-operator")
	assert.Equal(t, 4, r.code, "%s", r)
	checkStderr(t, r, `^error: not enough disk space for a local cluster in .*: \d+ MiB free, it needs about 300 MiB: free some space`, true)
	assert.Empty(t, e.leftovers())
}

// homeless runs labctl as nobody (home /nonexistent) without HOME: there is
// no safe place for a cluster's keys, so labctl refuses.
func homeless(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run as nobody")
	}
	e := newEnv(t)
	e.extra["HOME"] = ""
	require.NoError(t, os.Chmod(filepath.Dir(labctl), 0o755))
	require.NoError(t, os.Chmod(e.root, 0o755))
	cmd := exec.Command(labctl, "status")
	cmd.Env = e.environ()
	cmd.Dir = e.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	t.Logf("labctl status as nobody without HOME: %s", r)
	assert.Equal(t, 4, r.code, "%s", r)
	checkStderr(t, r, `^error: HOME is not set and your user has no home directory in the user database: set HOME`, true)
	assert.Empty(t, e.leftovers())
}
