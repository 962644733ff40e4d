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
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/labctl/labctl/internal/render"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/satoken"
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
	return CommandWith(logFile, restartsFile, lim, Duties{}, argv)
}

// Duties are what a supervisor may do besides restarting its manager.
type Duties struct {
	// SandboxSpec is a file holding the sandbox.Spec the manager runs in
	// ("": the manager runs as the supervisor's user, unconfined).
	SandboxSpec string
	// Token, when set, is renewed before it expires (its Note is the
	// supervisor's log).
	Token *satoken.Refresher
}

func (d Duties) args() []string {
	var a []string
	if d.SandboxSpec != "" {
		a = append(a, "--sandbox="+d.SandboxSpec)
	}
	if t := d.Token; t != nil {
		a = append(a, "--token-file="+t.File, "--token-sa="+t.Namespace+"/"+t.Name, "--token-admin="+t.AdminKubeconfig)
	}
	return a
}

// CommandWith is CommandLimited for a supervisor with duties.
func CommandWith(logFile, restartsFile string, lim Limits, duties Duties, argv []string) (path string, args []string, env []string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, nil, err
	}
	args = append([]string{"--log=" + logFile, "--restarts=" + restartsFile}, lim.args()...)
	args = append(args, duties.args()...)
	args = append(append(args, "--"), argv...)
	return self, args, []string{EnvVar + "=1"}, nil
}

// MaybeRun runs the supervisor, or the sandbox helper (which a
// supervisor starts its manager through), or a render worker the
// sandbox started, and exits if this process is one of them.
func MaybeRun() {
	sandbox.MaybeRun()
	render.MaybeRun()
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
	var box *sandbox.Spec
	var token satoken.Refresher
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
		case strings.HasPrefix(a, "--sandbox="):
			raw, err := os.ReadFile(strings.TrimPrefix(a, "--sandbox="))
			box = &sandbox.Spec{}
			if err == nil {
				err = json.Unmarshal(raw, box)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "supervise: sandbox spec:", err)
				return 2
			}
		case strings.HasPrefix(a, "--token-file="):
			token.File = strings.TrimPrefix(a, "--token-file=")
		case strings.HasPrefix(a, "--token-sa="):
			token.Namespace, token.Name, _ = strings.Cut(strings.TrimPrefix(a, "--token-sa="), "/")
		case strings.HasPrefix(a, "--token-admin="):
			token.AdminKubeconfig = strings.TrimPrefix(a, "--token-admin=")
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
	becomeSubreaper()
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

	if token.File != "" {
		token.Note = func(format string, args ...any) { note(logFile, format, args...) }
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go token.Run(ctx)
	}

	restarts := 0
	backoff := time.Second
	for {
		started := time.Now()
		cmd, exited, err := start(argv, logFile, enf, box)
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

func start(argv []string, logFile string, enf *enforcer, box *sandbox.Spec) (*exec.Cmd, <-chan error, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	// The manager must not outlive its supervisor (Pdeathsig), and starts
	// inside its cgroup when limits use one.
	attr, release, err := enf.procAttr()
	if err != nil {
		return nil, nil, err
	}
	defer release()
	cmd := exec.Command(argv[0], argv[1:]...)
	if box != nil {
		// Its own namespaces and uid; the manager is the namespace's
		// first process, so everything it forks dies with it.
		if cmd, err = box.Command(argv, attr); err != nil {
			return nil, nil, err
		}
	} else {
		cmd.SysProcAttr = attr
	}
	cmd.Stdout, cmd.Stderr = f, f
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

func note(logFile, format string, args ...any) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "==== labctl supervisor %s: %s\n", time.Now().Format(time.RFC3339), fmt.Sprintf(format, args...))
}
