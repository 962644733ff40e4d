//go:build linux

package supervise

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// What the supervisor asks of the kernel: the limits, the cgroup, the
// subreaper. Elsewhere (sys_other.go) nothing starts a supervisor: the
// local provider and the grading sandbox need Linux.

func limitCPUSeconds(s uint64) error {
	return unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: s, Max: s})
}

func limitAddressSpace(b uint64) error {
	return unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: b, Max: b})
}

func writable(path string) bool { return unix.Access(path, unix.W_OK) == nil }

// becomeSubreaper makes processes the manager forks and abandons ours.
func becomeSubreaper() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// procAttr returns the SysProcAttr for a manager: it dies with the
// supervisor, and starts inside the cgroup when there is one.
func (e *enforcer) procAttr() (*syscall.SysProcAttr, func(), error) {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if e == nil || e.group == nil {
		return attr, func() {}, nil
	}
	release, _, err := e.group.StartInside(attr)
	if err != nil {
		return nil, nil, err
	}
	return attr, release, nil
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
