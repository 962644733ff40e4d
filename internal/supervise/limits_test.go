//go:build linux

package supervise

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv selects what the test binary does when started as a "manager".
const childEnv = "LABCTL_SUPERVISE_TEST_CHILD"

func TestMain(m *testing.M) {
	MaybeRun() // the supervisor first: it passes childEnv on to the manager
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "spin":
		for x := 0; ; x++ {
			_ = x
		}
	case "alloc":
		// Address space, not resident memory: fresh pages are never touched.
		b := make([]byte, 5<<30)
		fmt.Println("allocated", len(b))
		select {}
	case "fork":
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Println("fork failed:", err)
			os.Exit(1)
		}
		fmt.Printf("grandchild %d\n", cmd.Process.Pid)
		os.Exit(3)
	}
}

// supervised starts a supervisor for the test binary in child mode and
// returns its log file, restarts file and a stop function.
func supervised(t *testing.T, mode string, lim Limits) (logFile, restartsFile string) {
	t.Helper()
	dir := t.TempDir()
	logFile, restartsFile = filepath.Join(dir, "manager.log"), filepath.Join(dir, "restarts")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path, args, env, err := CommandLimited(logFile, restartsFile, lim, []string{self, "-test.run=^$"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(append(os.Environ(), env...), childEnv+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_, _ = cmd.Process.Wait()
	})
	return logFile, restartsFile
}

// waitRestart waits until the supervisor counted a restart.
func waitRestart(t *testing.T, restartsFile string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if n, _ := Restarts(restartsFile); n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no restart within %s", timeout)
		case <-tick.C:
		}
	}
}

func readLog(t *testing.T, p string) string {
	t.Helper()
	raw, _ := os.ReadFile(p)
	return string(raw)
}

func TestCPULimitKillsSpinningManager(t *testing.T) {
	logFile, restarts := supervised(t, "spin", Limits{CPU: time.Second})
	waitRestart(t, restarts, 30*time.Second)
	log := readLog(t, logFile)
	if !strings.Contains(log, "CPU time 1s (RLIMIT_CPU)") || !strings.Contains(log, "it used its CPU-time limit of 1s") {
		t.Fatalf("log does not explain the CPU limit:\n%s", log)
	}
}

func TestMemoryLimitStopsHugeAllocation(t *testing.T) {
	if MemoryMechanism() != MechanismRlimit {
		t.Skip("this machine enforces memory through a cgroup; the address-space probe does not apply")
	}
	logFile, restarts := supervised(t, "alloc", Limits{Memory: 256 << 20})
	waitRestart(t, restarts, 30*time.Second)
	log := readLog(t, logFile)
	if strings.Contains(log, "allocated") || !strings.Contains(log, "out of memory") {
		t.Fatalf("a 5 GiB allocation was not refused:\n%s", log)
	}
	if !strings.Contains(log, MechanismRlimit) {
		t.Fatalf("log does not name the mechanism:\n%s", log)
	}
}

func TestForkedProcessesDoNotOutliveManager(t *testing.T) {
	logFile, restarts := supervised(t, "fork", Limits{})
	waitRestart(t, restarts, 30*time.Second)
	var pid int
	for _, l := range strings.Split(readLog(t, logFile), "\n") {
		if s, ok := strings.CutPrefix(l, "grandchild "); ok {
			pid, _ = strconv.Atoi(s)
		}
	}
	if pid == 0 {
		t.Fatalf("no grandchild in log:\n%s", readLog(t, logFile))
	}
	// The supervisor kills and reaps it before counting the restart.
	if err := syscall.Kill(pid, 0); err == nil {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		t.Fatalf("grandchild %d still exists: %s", pid, raw)
	}
}

func TestLimitArgsRoundTrip(t *testing.T) {
	in := Limits{CPU: 90 * time.Second, Memory: 1 << 30, StopGrace: 1500 * time.Millisecond}
	var out Limits
	for _, a := range in.args() {
		if ok, err := parseLimitArg(&out, a); !ok || err != nil {
			t.Fatalf("%s: ok=%v err=%v", a, ok, err)
		}
	}
	if out != in {
		t.Fatalf("got %+v, want %+v", out, in)
	}
	if ok, err := parseLimitArg(&out, "--cpu=zero"); !ok || err == nil {
		t.Fatal("bad --cpu accepted")
	}
}
