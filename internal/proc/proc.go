// Package proc starts and stops the background processes labctl owns (the
// local control plane, operator managers). labctl remembers each one as a
// Record (pid and start time) in its state files and stops only processes
// that match a record: a pid reused by another program, or a user's
// `tail -f` of a log, is never touched.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a running process found on the machine.
type Process struct {
	PID  int
	Name string // base name of argv[0]
	Args []string
}

// Spec describes a background process to start.
type Spec struct {
	Name    string // for messages
	Path    string
	Args    []string
	Env     []string // added to the environment
	Dir     string
	LogFile string // stdout and stderr are appended here
	// TiedToParent kills the process when the starting process dies (tests);
	// otherwise it gets its own session and outlives labctl.
	TiedToParent bool
}

// Running is a process this labctl started; Exited closes when it ends.
type Running struct {
	Spec   Spec
	PID    int
	Exited <-chan struct{}
	err    error
}

// Record returns what identifies the process later.
func (r *Running) Record() Record {
	st, _ := StartTime(r.PID)
	return Record{PID: r.PID, Start: st}
}

// Record identifies a process labctl started: its pid and its start time
// (clock ticks after boot, field 22 of /proc/PID/stat), which together
// never name another process, even after the pid is reused.
type Record struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Alive reports whether the recorded process still runs (not a zombie).
func (r Record) Alive() bool {
	if r.PID <= 0 || !Alive(r.PID) {
		return false
	}
	st, err := StartTime(r.PID)
	return err == nil && st == r.Start
}

// StartTime reads a process's start time from /proc/PID/stat.
func StartTime(pid int) (uint64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name (which may hold spaces)
	// start with field 3 (state); starttime is field 22.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// StopRecord stops the recorded process as Stop does, if it is still the
// same process; anything else with that pid is left alone. The check
// happens after a pidfd is opened, so the pid cannot be reused between
// the check and the signal.
func StopRecord(ctx context.Context, r Record, grace time.Duration) error {
	if r.PID <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		if !r.Alive() {
			return nil
		}
		return stopWithoutPidfd(ctx, r.PID, grace)
	}
	defer unix.Close(fd)
	if !r.Alive() {
		return nil
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0)
	if waitPidfd(ctx, fd, grace) {
		return nil
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	if waitPidfd(ctx, fd, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("process %d did not exit after SIGKILL", r.PID)
}

// KillUID kills every process of uid (a sandbox's own user, which
// nothing else runs as) and returns how many there were.
func KillUID(uid int) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name()), &st) != nil || int(st.Uid) != uid {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// Err is the process's exit error once Exited is closed.
func (r *Running) Err() error { return r.err }

// Start launches spec in the background.
func Start(spec Spec) (*Running, error) {
	if err := os.MkdirAll(filepath.Dir(spec.LogFile), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if spec.TiedToParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	exited := make(chan struct{})
	r := &Running{Spec: spec, PID: cmd.Process.Pid, Exited: exited}
	go func() {
		r.err = cmd.Wait()
		if r.err == nil {
			r.err = errors.New("exited with status 0")
		}
		close(exited)
	}()
	return r, nil
}

// Find lists the processes whose command line mentions dir. Tests use it
// to prove nothing is left; labctl itself stops processes by Record only.
func Find(dir string) ([]Process, error) {
	dir = filepath.Clean(dir)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var found []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if mentions(args[1:], dir) {
			found = append(found, Process{PID: pid, Name: filepath.Base(args[0]), Args: args})
		}
	}
	return found, nil
}

func mentions(args []string, dir string) bool {
	for _, a := range args {
		if i := strings.Index(a, dir); i >= 0 {
			rest := a[i+len(dir):]
			if rest == "" || rest[0] == '/' {
				return true
			}
		}
	}
	return false
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// state is the field after the parenthesised command name
	if i := bytes.LastIndexByte(raw, ')'); i > 0 && i+2 < len(raw) {
		return raw[i+2] != 'Z'
	}
	return true
}

// Stop sends SIGTERM, waits for the process to exit (watching its pidfd, so
// it returns the moment it does), and sends SIGKILL after grace.
func Stop(ctx context.Context, pid int, grace time.Duration) error {
	if !Alive(pid) {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return stopWithoutPidfd(ctx, pid, grace)
	}
	defer unix.Close(fd)
	_ = unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0)
	if waitPidfd(ctx, fd, grace) {
		return nil
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	if waitPidfd(ctx, fd, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("process %d did not exit after SIGKILL", pid)
}

// waitPidfd blocks until the pidfd becomes readable (the process exited) or
// the timeout passes.
func waitPidfd(ctx context.Context, fd int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		// poll in slices of at most 200ms so a cancelled ctx is noticed
		ms := int(min(left, 200*time.Millisecond) / time.Millisecond)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return false
		}
		if n > 0 {
			return true
		}
	}
}

func stopWithoutPidfd(ctx context.Context, pid int, grace time.Duration) error {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for Alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(5 * time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// Memory returns the resident (RSS) and proportional (PSS) set sizes of pid
// in bytes. PSS counts pages shared between processes (such as the one
// multi-call control-plane binary they all map) once in total, so the sum
// of PSS over a cluster's processes is the memory it really uses.
func Memory(pid int) (rss, pss uint64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		raw, _ = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "Rss:", "VmRSS:":
			rss = kb * 1024
		case "Pss:":
			pss = kb * 1024
		}
	}
	if pss == 0 {
		pss = rss
	}
	return rss, pss
}

// Tail returns the last n non-empty lines of a log file.
func Tail(path string, n int) []string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	if len(raw) > 64<<10 {
		raw = raw[len(raw)-64<<10:]
	}
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// SupervisorRecord is the record file of an operator's supervisor, in
// the operator's directory under a local cluster's operators/.
const SupervisorRecord = "supervisor.json"

// SaveRecord writes a record file (atomically).
func SaveRecord(path string, r Record) error {
	raw := fmt.Sprintf("{\"pid\":%d,\"start\":%d}\n", r.PID, r.Start)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(raw), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadRecords reads the record files matching a glob pattern; unreadable
// ones are skipped (they name no process labctl could recognise).
func LoadRecords(pattern string) []Record {
	paths, _ := filepath.Glob(pattern)
	var out []Record
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r Record
		if _, err := fmt.Sscanf(strings.TrimSpace(string(raw)), "{\"pid\":%d,\"start\":%d}", &r.PID, &r.Start); err == nil && r.PID > 0 {
			out = append(out, r)
		}
	}
	return out
}
