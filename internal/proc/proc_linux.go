//go:build linux

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

// userHZ is the unit of the CPU times in /proc/PID/stat: the kernel's
// USER_HZ, 100 on every architecture Linux exposes to user space.
const userHZ = 100

// TreeCPU returns the CPU time (user and system) that pid and every
// process below it have used so far, children that ended and were waited
// for included. It reads /proc once; a process that ends meanwhile is left
// out, so two readings are compared only while the tree is alive.
func TreeCPU(pid int) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	type stat struct{ ppid, ticks int64 }
	stats := map[int]stat{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised name: state(3) ppid(4) ...
		// utime(14) stime(15) cutime(16) cstime(17).
		i := bytes.LastIndexByte(raw, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(raw[i+1:]))
		if len(f) < 15 {
			continue
		}
		var n [5]int64
		for j, k := range []int{1, 11, 12, 13, 14} {
			n[j], _ = strconv.ParseInt(f[k], 10, 64)
		}
		stats[p] = stat{ppid: n[0], ticks: n[1] + n[2] + n[3] + n[4]}
	}
	if _, ok := stats[pid]; !ok {
		return 0, fmt.Errorf("process %d is not running", pid)
	}
	children := map[int][]int{}
	for p, s := range stats {
		children[int(s.ppid)] = append(children[int(s.ppid)], p)
	}
	var ticks int64
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		ticks += stats[queue[0]].ticks
		queue = append(queue, children[queue[0]]...)
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// KillMarked kills (SIGKILL) every process whose environment holds entry
// (KEY=VALUE), but this one, and returns how many it killed. A command
// given a fresh entry leaves it to all its descendants, whatever process
// group or session they moved to: once the command has ended, they are
// what it left running (envtest's etcd and kube-apiserver, when a test
// binary dies before its suite stops them).
func KillMarked(entry string) int {
	killed := map[int]bool{}
	// Twice: a process may fork while the first pass reads /proc.
	for range 2 {
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			pid, err := strconv.Atoi(filepath.Base(d))
			if err != nil || pid == os.Getpid() || killed[pid] {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(d, "environ"))
			if err != nil || !hasEntry(raw, entry) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed[pid] = true
			}
		}
	}
	return len(killed)
}

// hasEntry: environ (NUL-separated) holds entry exactly.
func hasEntry(environ []byte, entry string) bool {
	for e := range bytes.SplitSeq(environ, []byte{0}) {
		if string(e) == entry {
			return true
		}
	}
	return false
}
