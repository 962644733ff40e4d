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
)

// EnvVar marks a process started to be a supervisor.
const EnvVar = "LABCTL_SUPERVISE"

// Command returns the command line that supervises argv, logging to
// logFile and counting restarts in restartsFile.
func Command(logFile, restartsFile string, argv []string) (path string, args []string, env []string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, nil, err
	}
	args = append([]string{"--log=" + logFile, "--restarts=" + restartsFile, "--"}, argv...)
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
	for i, a := range args {
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

	restarts := 0
	backoff := time.Second
	for {
		started := time.Now()
		cmd, exited, err := start(argv, logFile)
		if err != nil {
			note(logFile, "cannot start %s: %v", argv[0], err)
			return 1
		}
		select {
		case <-stop:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			return 0
		case err := <-exited:
			restarts++
			_ = os.WriteFile(restartsFile, []byte(strconv.Itoa(restarts)), 0o644)
			if time.Since(started) > time.Minute {
				backoff = time.Second
			}
			note(logFile, "manager exited (%v); restart %d in %s", err, restarts, backoff)
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

func start(argv []string, logFile string) (*exec.Cmd, <-chan error, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	// The manager must not outlive its supervisor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, exited, nil
}

func note(logFile, format string, args ...any) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "==== labctl supervisor %s: %s\n", time.Now().Format(time.RFC3339), fmt.Sprintf(format, args...))
}
