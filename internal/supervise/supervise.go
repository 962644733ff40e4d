// Package supervise keeps an operator's manager running the way a kubelet
// keeps a pod's container running: it restarts the process when it exits,
// with back-off, and counts restarts, so checks can tell a crash-looping
// operator from a healthy one on the local provider too.
//
// The supervisor is the labctl executable itself (or a test binary)
// re-executed with LABCTL_SUPERVISE=1; programs that may start one call
// MaybeRun first thing in main or TestMain.
package supervise

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// EnvVar marks a process started to be a supervisor.
const EnvVar = "LABCTL_SUPERVISE"

// Command returns the command line that supervises argv, logging to
// logFile and counting restarts in restartsFile.
func Command(logFile, restartsFile string, argv []string) (path string, args []string, env []string, err error) {
	return CommandLimited(logFile, restartsFile, Limits{}, argv)
}

// CommandLimited is Command for a manager bounded by lim (see Limits).
func CommandLimited(logFile, restartsFile string, lim Limits, argv []string) (path string, args []string, env []string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, nil, err
	}
	args = append([]string{"--log=" + logFile, "--restarts=" + restartsFile}, lim.args()...)
	args = append(append(args, "--"), argv...)
	return self, args, []string{EnvVar + "=1"}, nil
}

// MaybeRun runs the supervisor and exits if this process is one.
func MaybeRun() {
	if os.Getenv(EnvVar) != "1" {
		return
	}
	os.Exit(run(os.Args[1:]))
}

// Restarts reads a restarts file (0 when absent).
func Restarts(path string) (int, error) {
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(raw)))
}

func run(args []string) int {
	var logFile, restartsFile string
	var argv []string
	var lim Limits
	for i, a := range args {
		if ok, err := parseLimitArg(&lim, a); ok {
			if err != nil {
				fmt.Fprintln(os.Stderr, "supervise:", err)
				return 2
			}
			continue
		}
		switch {
		case strings.HasPrefix(a, "--log="):
			logFile = strings.TrimPrefix(a, "--log=")
		case strings.HasPrefix(a, "--restarts="):
			restartsFile = strings.TrimPrefix(a, "--restarts=")
		case a == "--":
			argv = args[i+1:]
		}
		if argv != nil {
			break
		}
	}
	if logFile == "" || restartsFile == "" || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "supervise: usage: --log=FILE --restarts=FILE -- command args...")
		return 2
	}
	_ = os.Unsetenv(EnvVar)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	// Processes the manager forks and abandons become ours, so none of
	// them outlives the manager.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	var enf *enforcer
	if !lim.IsZero() {
		var desc string
		var err error
		if enf, desc, err = newEnforcer(lim); err != nil {
			note(logFile, "cannot apply resource limits: %v", err)
			return 1
		}
		note(logFile, "limits for the manager: %s", desc)
		defer enf.close()
	}

	restarts := 0
	backoff := time.Second
	for {
		started := time.Now()
		cmd, exited, err := start(argv, logFile, enf)
		if err != nil {
			note(logFile, "cannot start %s: %v", argv[0], err)
			return 1
		}
		select {
		case <-stop:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(lim.grace()):
				_ = cmd.Process.Kill()
				<-exited
			}
			killOrphans()
			return 0
		case err := <-exited:
			killOrphans()
			restarts++
			_ = os.WriteFile(restartsFile, []byte(strconv.Itoa(restarts)), 0o644)
			if time.Since(started) > time.Minute {
				backoff = time.Second
			}
			why := ""
			if limit := enf.explain(cmd.ProcessState); limit != "" {
				why = ": " + limit
			}
			note(logFile, "manager exited (%v)%s; restart %d in %s", err, why, restarts, backoff)
		}
		// Back-off between restarts, as a kubelet's CrashLoopBackOff does.
		select {
		case <-stop:
			return 0
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

func start(argv []string, logFile string, enf *enforcer) (*exec.Cmd, <-chan error, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	// The manager must not outlive its supervisor (Pdeathsig), and starts
	// inside its cgroup when limits use one.
	attr, release, err := enf.procAttr()
	if err != nil {
		return nil, nil, err
	}
	defer release()
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		enf.afterExit()
		exited <- err
	}()
	return cmd, exited, nil
}

// killOrphans kills and reaps the processes re-parented to this
// supervisor (a subreaper) after the manager that forked them exited.
func killOrphans() {
	self := os.Getpid()
	for pass := 0; pass < 10; pass++ {
		found := false
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || parentOf(pid) != self {
				continue
			}
			found = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, 0, nil)
		}
		if !found {
			return
		}
	}
}

// parentOf reads a process's parent pid from /proc (0 when unknown).
func parentOf(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func note(logFile, format string, args ...any) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "==== labctl supervisor %s: %s\n", time.Now().Format(time.RFC3339), fmt.Sprintf(format, args...))
}
