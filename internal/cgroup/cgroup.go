// Package cgroup puts a group of processes (a grading box, a manager)
// under kernel limits on processes, memory and CPU that hold for the
// group as a whole, whatever it forks. Both hierarchies are supported:
//
//   - cgroup v2 (one unified tree at /sys/fs/cgroup): groups live under
//     /sys/fs/cgroup/labctl, or nested in the labctl group the caller
//     already runs in; a process starts inside its group
//     (CLONE_INTO_CGROUP), and cgroup.kill ends everything in it;
//   - cgroup v1 (one tree per controller, /sys/fs/cgroup/{pids,memory,cpu}):
//     groups nest under the caller's own group in each tree; a process is
//     moved in right after it starts (Add), and is killed pid by pid.
//
// Where neither is writable (not root, a read-only /sys), New fails and
// the caller falls back to per-process limits.
package cgroup

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// Limits of a group; a zero field sets no limit.
type Limits struct {
	// Pids bounds the processes and threads in the group.
	Pids int64
	// Memory bounds the group's memory (resident and page cache) in bytes;
	// no swap beyond it. Past it the kernel kills a process of the group.
	Memory int64
	// CPUWeight is the group's share of contended CPU, 1..10000 with 100
	// a normal process's (v2 cpu.weight; v1 cpu.shares = weight*1024/100).
	CPUWeight int
	// CPUs bounds the CPU time per wall-clock second (2 = two cores).
	CPUs float64
}

// Group is one cgroup labctl made, in every controller it limits.
type Group interface {
	// Path names the group (v2: its directory; v1: its pids directory).
	Path() string
	// StartInside sets attr so a process starts inside the group (v2's
	// CLONE_INTO_CGROUP); release is called once it started. False on v1:
	// start the process, then Add it before it can fork.
	StartInside(attr *syscall.SysProcAttr) (release func(), ok bool, err error)
	// Add moves a started process (all its threads) into the group.
	Add(pid int) error
	// OOMKills counts the processes the kernel killed for the memory limit.
	OOMKills() int
	// Kill kills every process in the group and waits (a few seconds at
	// most) until it is empty.
	Kill()
	// Remove kills what is left and deletes the group.
	Remove() error
}

// Support says whether New can work here, and how.
type Support struct {
	// Version is 1 or 2; 0 when no writable hierarchy offers a controller.
	Version int
	// Controllers usable among pids, memory and cpu.
	Controllers []string
	// Reason says why not, when Version is 0.
	Reason string
}

// Has says whether a controller is usable.
func (s Support) Has(controller string) bool {
	for _, c := range s.Controllers {
		if c == controller {
			return true
		}
	}
	return false
}

// String describes the support in a few words for doctor and reports.
func (s Support) String() string {
	if s.Version == 0 {
		return "no cgroups (" + s.Reason + ")"
	}
	return fmt.Sprintf("cgroup v%d (%s)", s.Version, strings.Join(s.Controllers, ", "))
}

// covers says whether every limit set in lim has its controller.
func (s Support) covers(lim Limits) error {
	if s.Version == 0 {
		return nil // New reports ErrUnsupported
	}
	for c, set := range map[string]bool{"pids": lim.Pids > 0, "memory": lim.Memory > 0, "cpu": lim.CPUWeight > 0 || lim.CPUs > 0} {
		if set && !s.Has(c) {
			return fmt.Errorf("cgroup v%d here offers no %s controller to limit with", s.Version, c)
		}
	}
	return nil
}

// wanted are the controllers labctl limits.
var wanted = []string{"pids", "memory", "cpu"}

// ErrUnsupported: no writable cgroup hierarchy here.
var ErrUnsupported = errors.New("no writable cgroup hierarchy")

// Name makes a group name of s: letters, digits, '.', '_' and '-' only,
// at most 64 characters.
func Name(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[len(b)-64:]
	}
	if len(b) == 0 || b[0] == '.' {
		return "g" + string(b)
	}
	return string(b)
}

// killWait is how long Kill waits for a group to empty.
const killWait = 5 * time.Second

func fmtLimitErr(file string, err error) error {
	return fmt.Errorf("set %s: %w", file, err)
}
