//go:build linux

// Package faults runs labctl's command-line binary against bad input and
// injected faults (interrupts, a killed API server, full disks, corrupt
// files, two commands at once) and checks the verdict a user sees: the
// exit code, one line on stderr without stack traces or client-go logs,
// and nothing left behind.
package faults

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labctl/labctl/internal/testcluster"
)

// labctl is the binary under test, built once by TestMain.
var labctl string

// goEnv is the Go toolchain's own caches: isolated homes must not make
// every case rebuild the world.
var goEnv []string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "labctl-faults-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		labctl = filepath.Join(dir, "labctl")
		build := exec.Command("go", "build", "-o", labctl, "./cmd/labctl")
		build.Dir = moduleRoot()
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building labctl:", err)
			return 1
		}
		for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT"} {
			out, err := exec.Command("go", "env", v).Output()
			if err == nil {
				goEnv = append(goEnv, v+"="+strings.TrimSpace(string(out)))
			}
		}
		code := m.Run()
		stopShared()
		if suiteCacheDir != "" {
			_ = os.RemoveAll(suiteCacheDir)
		}
		return code
	}())
}

func moduleRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

// env is one case's world: its own HOME, state, cache, kubeconfig and
// TMPDIR, so whatever it leaves is its own.
type env struct {
	root       string
	home       string
	state      string // XDG_STATE_HOME
	cache      string // XDG_CACHE_HOME
	kubeconfig string
	tmp        string
	binDir     string
	extra      map[string]string // more variables; "" removes one
}

func newEnv(t *testing.T) *env {
	// Not t.TempDir(): its name carries the test's, with commas, which
	// kwok takes for a list separator in --config.
	root, err := os.MkdirTemp("", "labctl-fault-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	e := &env{root: root, home: filepath.Join(root, "home"), state: filepath.Join(root, "state"),
		cache: filepath.Join(root, "cache"), tmp: filepath.Join(root, "tmp"), extra: map[string]string{}}
	e.kubeconfig = filepath.Join(e.home, ".kube", "config")
	for _, d := range []string{e.home, e.state, e.cache, e.tmp} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	return e
}

func (e *env) clustersDir() string { return filepath.Join(e.state, "labctl", "clusters") }

func (e *env) environ() []string {
	vars := map[string]string{
		"PATH":           os.Getenv("PATH"),
		"HOME":           e.home,
		"XDG_STATE_HOME": e.state,
		"XDG_CACHE_HOME": e.cache,
		"KUBECONFIG":     e.kubeconfig,
		"TMPDIR":         e.tmp,
		"NO_COLOR":       "1",
		"LANG":           "C.UTF-8",
		"GOTOOLCHAIN":    "local",
		"GOFLAGS":        os.Getenv("GOFLAGS"),
		"GOPROXY":        os.Getenv("GOPROXY"),
	}
	if e.binDir != "" {
		vars["KUBEBUILDER_ASSETS"] = e.binDir
	}
	for _, kv := range goEnv {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	for k, v := range e.extra {
		vars[k] = v
	}
	var out []string
	for k, v := range vars {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// result is what a user would see.
type result struct {
	code   int
	stdout string
	stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// running is a labctl started in the background.
type running struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	done           chan struct{}
}

func (e *env) start(t *testing.T, args ...string) *running {
	t.Helper()
	cmd := exec.Command(labctl, args...)
	cmd.Env = e.environ()
	cmd.Dir = e.root
	r := &running{cmd: cmd, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(r.done) }()
	return r
}

func (r *running) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("labctl %s did not finish within %s\n%s%s", strings.Join(r.cmd.Args[1:], " "), timeout, r.stdout, r.stderr)
	}
	res := result{code: r.cmd.ProcessState.ExitCode(), stdout: r.stdout.String(), stderr: r.stderr.String()}
	t.Logf("labctl %s: %s", strings.Join(r.cmd.Args[1:], " "), res)
	return res
}

func (e *env) run(t *testing.T, args ...string) result {
	t.Helper()
	return e.start(t, args...).wait(t, 8*time.Minute)
}

// noise is what must never reach a user's terminal.
// (A compiler's "main.go:4:2: ..." is a message for the student, not noise.)
var noise = regexp.MustCompile(`goroutine \d+ \[|^panic: |runtime/\w+\.go|\.go:\d+ \+0x|\.go:\d+$|^[IWEF]\d{4} \d\d:\d\d|retrywatcher|reflector\.go|^\s+/|\bat 0x[0-9a-f]+`)

// checkStderr: no stack trace or log noise anywhere; a failure is one
// line (the last, "error: ..." or "interrupted...") matching want.
func checkStderr(t *testing.T, r result, want string, oneLine bool) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if r.stderr == "" {
		lines = nil
	}
	for _, l := range lines {
		assert.NotRegexp(t, noise, l, "stderr carries a stack trace or log noise\n%s", r)
	}
	if r.code == 0 {
		if want != "" {
			assert.Regexp(t, want, r.stderr, "%s", r)
		}
		return
	}
	if r.code == 3 { // verify's report says it; nothing is an error
		return
	}
	require.NotEmpty(t, lines, "a failure says why on stderr\n%s", r)
	if oneLine {
		assert.Len(t, lines, 1, "a failure is one line on stderr\n%s", r)
	}
	errorLines := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "error: ") {
			errorLines++
		}
	}
	assert.LessOrEqual(t, errorLines, 1, "one error line\n%s", r)
	if want != "" {
		assert.Regexp(t, want, lines[len(lines)-1], "the error line\n%s", r)
	}
}

// --- leftovers -------------------------------------------------------

// procsUnder lists the processes whose command line or working directory
// is under dir, pid -> command line.
func procsUnder(dir string) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cmdline := strings.ReplaceAll(string(raw), "\x00", " ")
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if strings.Contains(cmdline, dir) || strings.HasPrefix(cwd, dir) {
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); bytes.Contains(st, []byte(") Z ")) {
				continue // a zombie holds nothing
			}
			out[pid] = cmdline
		}
	}
	return out
}

// listeningPorts counts the TCP ports pids listen on.
func listeningPorts(pids map[int]string) []int {
	inodes := map[string]bool{}
	for pid := range pids {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if in, ok := strings.CutPrefix(link, "socket:["); ok {
				inodes[strings.TrimSuffix(in, "]")] = true
			}
		}
	}
	var ports []int
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] != "0A" || !inodes[fs[9]] { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fs[1], ":")
			p, _ := strconv.ParseInt(hexPort, 16, 32)
			ports = append(ports, int(p))
		}
	}
	return ports
}

// labctlContexts lists the labctl-* contexts of a kubeconfig.
func labctlContexts(path string) []string {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for name := range cfg.Contexts {
		if strings.HasPrefix(name, "labctl-") {
			out = append(out, name)
		}
	}
	return out
}

// labctlNamespaces lists the live (not terminating) namespaces labctl made.
func labctlNamespaces(t *testing.T, kubeconfig string) []string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=labctl"})
	require.NoError(t, err)
	var out []string
	for _, ns := range list.Items {
		if ns.DeletionTimestamp == nil {
			out = append(out, ns.Name)
		}
	}
	return out
}

// leftovers describes what a case left in its world that it should not
// have: processes, listening ports, cluster state (except the clusters it
// is meant to leave running), labctl contexts of clusters that are gone,
// and anything in TMPDIR.
func (e *env) leftovers(keep ...string) []string {
	var out []string
	procs := procsUnder(e.root)
	for pid, cmd := range procs {
		keepIt := false
		for _, k := range keep {
			if strings.Contains(cmd, filepath.Join(e.clustersDir(), k)) {
				keepIt = true
			}
		}
		if keepIt {
			delete(procs, pid)
			continue
		}
		out = append(out, fmt.Sprintf("process %d: %.120s", pid, cmd))
	}
	for _, p := range listeningPorts(procs) {
		out = append(out, fmt.Sprintf("listening port %d", p))
	}
	entries, _ := os.ReadDir(e.clustersDir())
	for _, ent := range entries {
		name := strings.TrimSuffix(ent.Name(), ".lock")
		if !contains(keep, name) {
			out = append(out, "cluster state "+ent.Name())
		}
	}
	for _, c := range labctlContexts(e.kubeconfig) {
		if !contains(keep, strings.TrimPrefix(c, "labctl-")) {
			out = append(out, "kubeconfig context "+c)
		}
	}
	tmp, _ := os.ReadDir(e.tmp)
	for _, ent := range tmp {
		out = append(out, "temp "+ent.Name())
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// --- waiting without sleeping ----------------------------------------

// waitForFile waits until path exists, watching its directory with
// inotify; the directory must exist.
func waitForFile(t *testing.T, path string, timeout time.Duration, done <-chan struct{}) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	require.NoError(t, err)
	defer unix.Close(fd)
	_, err = unix.InotifyAddWatch(fd, filepath.Dir(path), unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE)
	require.NoError(t, err)
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 4096)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-done:
			t.Fatalf("the command ended before %s appeared", path)
		default:
		}
		left := time.Until(deadline)
		require.Positive(t, left, "%s did not appear within %s", path, timeout)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		// wake at least every second to notice the command ending
		_, _ = unix.Poll(pfd, int(min(left, time.Second).Milliseconds()))
		_, _ = unix.Read(fd, buf)
	}
}

// --- clusters --------------------------------------------------------

var (
	binDirOnce sync.Once
	binDir     string
	binDirErr  error
)

// controlPlane is the directory of prebuilt control-plane binaries; cases
// that need a cluster skip without them (and in -short runs).
func controlPlane(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a local cluster")
	}
	binDirOnce.Do(func() {
		if os.Getenv(testcluster.BinariesEnv) == "" {
			binDirErr = fmt.Errorf("set %s (make test does)", testcluster.BinariesEnv)
			return
		}
		b, err := testcluster.Binaries(context.Background())
		if err != nil {
			binDirErr = err
			return
		}
		binDir = b.Dir
	})
	if binDirErr != nil {
		t.Skip("no control-plane binaries: ", binDirErr)
	}
	return binDir
}

// suiteCache is shared by the cases that deploy the reference operator:
// its extracted source and built manager, like the control-plane
// binaries, are fixtures, not state under test.
var (
	suiteCacheDir string
	suiteCache    = sync.OnceValue(func() string {
		dir, err := os.MkdirTemp("", "labctl-faults-cache-")
		if err != nil {
			panic(err)
		}
		suiteCacheDir = dir
		return dir
	})
)

// shared is the one local cluster (with the reference operator) that the
// cases needing a running cluster use; cases that break a cluster start
// their own.
type sharedCluster struct {
	env  *env
	name string
	err  error
}

var (
	sharedOnce sync.Once
	shared     sharedCluster
)

const sharedName = "faults"

func sharedEnv(t *testing.T) *sharedCluster {
	t.Helper()
	bins := controlPlane(t)
	sharedOnce.Do(func() {
		root, err := os.MkdirTemp("", "labctl-faults-shared-")
		if err != nil {
			shared.err = err
			return
		}
		e := &env{root: root, home: filepath.Join(root, "home"), state: filepath.Join(root, "state"),
			cache: suiteCache(), tmp: filepath.Join(root, "tmp"), binDir: bins, extra: map[string]string{}}
		e.kubeconfig = filepath.Join(e.home, ".kube", "config")
		for _, d := range []string{e.home, e.state, e.tmp} {
			_ = os.MkdirAll(d, 0o755)
		}
		shared = sharedCluster{env: e, name: sharedName}
		r := e.start(t, "up", "--provider", "local", "--name", sharedName)
		res := r.wait(t, 10*time.Minute)
		if res.code != 0 {
			shared.err = fmt.Errorf("the shared cluster did not start: %s", res)
		}
	})
	require.NoError(t, shared.err)
	return &shared
}

// caseEnv is a fresh world for a case on the shared cluster: its own
// HOME, kubeconfig and TMPDIR, the shared cluster's state.
func (s *sharedCluster) caseEnv(t *testing.T) *env {
	e := newEnv(t)
	e.state = s.env.state
	e.cache = s.env.cache
	e.binDir = s.env.binDir
	return e
}

func (s *sharedCluster) adminKubeconfig() string {
	return filepath.Join(s.env.clustersDir(), s.name, "kubeconfig")
}

func stopShared() {
	if shared.env == nil {
		return
	}
	cmd := exec.Command(labctl, "down", "--name", sharedName)
	cmd.Env = shared.env.environ()
	_ = cmd.Run()
	_ = os.RemoveAll(shared.env.root)
}

// pidOf reads a component's pid from a local cluster's state.json.
func pidOf(t *testing.T, clusterDir, component string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(clusterDir, "state.json"))
	require.NoError(t, err)
	m := regexp.MustCompile(`"` + component + `": (\d+)`).FindSubmatch(raw)
	require.NotNil(t, m, "no pid of %s in state.json", component)
	pid, _ := strconv.Atoi(string(m[1]))
	return pid
}

func signal(t *testing.T, r *running, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(sig))
}
