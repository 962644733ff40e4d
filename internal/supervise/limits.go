package supervise

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/cgroup"
)

// Limits bound what one manager process may use. The zero value sets no
// limit. They serve grading, where a submission's manager may spin or leak.
type Limits struct {
	// CPU is the CPU time (user + system) one manager process may use
	// before it is killed (RLIMIT_CPU; a restarted manager starts again
	// from zero). 0: unlimited.
	CPU time.Duration
	// Memory bounds the manager's memory in bytes. Where labctl may create
	// cgroup v2 groups (root, with the memory controller in
	// /sys/fs/cgroup), it is the group's memory.max (nested in the
	// grading box's group, whose limits hold too): resident memory, the
	// manager and anything it forks. Elsewhere it is enforced through the
	// address space (RLIMIT_AS), at Memory + AddressSpaceSlack, because a
	// Go program reserves address space far beyond what it touches.
	Memory uint64
	// StopGrace is how long a manager may take to exit after SIGTERM
	// when the supervisor is stopped, before SIGKILL (default 10s).
	StopGrace time.Duration
}

// IsZero reports whether no limit is set (StopGrace aside).
func (l Limits) IsZero() bool { return l.CPU <= 0 && l.Memory == 0 }

func (l Limits) grace() time.Duration {
	if l.StopGrace > 0 {
		return l.StopGrace
	}
	return 10 * time.Second
}

// AddressSpaceSlack is added to Limits.Memory for RLIMIT_AS: a Go
// manager maps about 1.3 GiB of address space (heap arena index, thread
// stacks, the binary) while its resident memory is ~50 MiB.
const AddressSpaceSlack = 3 << 30

// Memory mechanisms, as MemoryMechanism reports them.
const (
	MechanismCgroup = "cgroup v2 memory.max"
	MechanismRlimit = "RLIMIT_AS (address space)"
)

// MemoryMechanism says how Limits.Memory is enforced on this machine.
func MemoryMechanism() string {
	if cgroupV2Usable() {
		return MechanismCgroup
	}
	return MechanismRlimit
}

// cgroupV2Usable: a writable unified hierarchy that offers the memory
// controller (v1's is the grading box's, see internal/cgroup: a manager
// cannot be started inside a v1 group before it runs).
func cgroupV2Usable() bool {
	s := cgroup.Detect()
	return s.Version == 2 && s.Has("memory")
}

// args encodes limits for the supervisor's command line.
func (l Limits) args() []string {
	var a []string
	if l.CPU > 0 {
		a = append(a, "--cpu="+strconv.FormatInt(int64((l.CPU+time.Second-1)/time.Second), 10))
	}
	if l.Memory > 0 {
		a = append(a, "--memory="+strconv.FormatUint(l.Memory, 10))
	}
	if l.StopGrace > 0 {
		a = append(a, "--grace="+l.StopGrace.String())
	}
	return a
}

// parseLimitArg reads one --cpu= or --memory= argument; ok is false for
// other arguments.
func parseLimitArg(l *Limits, a string) (ok bool, err error) {
	switch {
	case strings.HasPrefix(a, "--cpu="):
		n, err := strconv.ParseInt(strings.TrimPrefix(a, "--cpu="), 10, 64)
		if err != nil || n <= 0 {
			return true, fmt.Errorf("bad %s", a)
		}
		l.CPU = time.Duration(n) * time.Second
		return true, nil
	case strings.HasPrefix(a, "--grace="):
		d, err := time.ParseDuration(strings.TrimPrefix(a, "--grace="))
		if err != nil || d <= 0 {
			return true, fmt.Errorf("bad %s", a)
		}
		l.StopGrace = d
		return true, nil
	case strings.HasPrefix(a, "--memory="):
		n, err := strconv.ParseUint(strings.TrimPrefix(a, "--memory="), 10, 64)
		if err != nil || n == 0 {
			return true, fmt.Errorf("bad %s", a)
		}
		l.Memory = n
		return true, nil
	}
	return false, nil
}

// enforcer applies Limits to the managers a supervisor starts.
type enforcer struct {
	lim Limits
	// group is the v2 group managers start in (nil when RLIMIT_AS is used).
	group cgroup.Group
}

// newEnforcer prepares the limits. CPU time and (without a cgroup) address
// space are set as rlimits on the supervisor itself, which every manager
// it starts inherits; the supervisor, a process that only waits, stays far
// below them. With cgroup v2 each manager starts inside a fresh group.
func newEnforcer(lim Limits) (*enforcer, string, error) {
	e := &enforcer{lim: lim}
	var notes []string
	if lim.CPU > 0 {
		s := uint64((lim.CPU + time.Second - 1) / time.Second)
		// soft == hard: the kernel sends SIGKILL when the limit is reached
		// (a Go program ignores the SIGXCPU a lower soft limit would send).
		if err := limitCPUSeconds(s); err != nil {
			return nil, "", fmt.Errorf("set RLIMIT_CPU: %w", err)
		}
		notes = append(notes, fmt.Sprintf("CPU time %ds (RLIMIT_CPU)", s))
	}
	if lim.Memory > 0 {
		if g, err := makeCgroup(lim.Memory); err == nil {
			e.group = g
			notes = append(notes, fmt.Sprintf("memory %s (%s %s)", human(lim.Memory), MechanismCgroup, g.Path()))
		} else {
			as := lim.Memory + AddressSpaceSlack
			if err := limitAddressSpace(as); err != nil {
				return nil, "", fmt.Errorf("set RLIMIT_AS: %w", err)
			}
			notes = append(notes, fmt.Sprintf("memory %s (%s %s)", human(lim.Memory), MechanismRlimit, human(as)))
		}
	}
	return e, strings.Join(notes, ", "), nil
}

// makeCgroup creates the group manager-<pid> with memory.max (under
// /sys/fs/cgroup/labctl, or inside the grading box this runs in).
func makeCgroup(limit uint64) (cgroup.Group, error) {
	if !cgroupV2Usable() {
		return nil, errors.New("no writable cgroup v2 with the memory controller")
	}
	return cgroup.New(fmt.Sprintf("manager-%d", os.Getpid()), cgroup.Limits{Memory: int64(limit)})
}

// explain says which limit, if any, ended a manager that exited with
// state (nil when it was not a limit).
func (e *enforcer) explain(state *os.ProcessState) string {
	if e == nil || state == nil {
		return ""
	}
	if e.lim.CPU > 0 && state.UserTime()+state.SystemTime() >= e.lim.CPU-100*time.Millisecond {
		return fmt.Sprintf("it used its CPU-time limit of %s", e.lim.CPU)
	}
	if e.group != nil && e.group.OOMKills() > 0 {
		return fmt.Sprintf("it exceeded its memory limit of %s", human(e.lim.Memory))
	}
	return ""
}

// afterExit kills whatever the manager left behind in its cgroup.
func (e *enforcer) afterExit() {
	if e == nil || e.group == nil {
		return
	}
	e.group.Kill()
}

// close removes the cgroup, killing what is left in it.
func (e *enforcer) close() {
	if e == nil || e.group == nil {
		return
	}
	_ = e.group.Remove()
}

func human(b uint64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%dMiB", b>>20)
	}
	return fmt.Sprintf("%dB", b)
}
