package supervise

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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
	// /sys/fs/cgroup), it is the group's memory.max: resident memory, the
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

// cgroupRoot is the cgroup v2 mount; a variable for tests.
var cgroupRoot = "/sys/fs/cgroup"

// MemoryMechanism says how Limits.Memory is enforced on this machine.
func MemoryMechanism() string {
	if cgroupV2Usable() {
		return MechanismCgroup
	}
	return MechanismRlimit
}

// cgroupV2Usable: a unified hierarchy at cgroupRoot that offers the memory
// controller to its children, and that this process may write.
func cgroupV2Usable() bool {
	raw, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers"))
	if err != nil || !hasWord(string(raw), "memory") {
		return false
	}
	return writable(cgroupRoot)
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
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
	// cgroup is the v2 group managers start in ("" when RLIMIT_AS is used).
	cgroup string
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
		if cg, err := makeCgroup(lim.Memory); err == nil {
			e.cgroup = cg
			notes = append(notes, fmt.Sprintf("memory %s (%s %s)", human(lim.Memory), MechanismCgroup, cg))
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

// makeCgroup creates /sys/fs/cgroup/labctl/manager-<pid> with memory.max.
func makeCgroup(limit uint64) (string, error) {
	if !cgroupV2Usable() {
		return "", errors.New("no writable cgroup v2 with the memory controller")
	}
	parent := filepath.Join(cgroupRoot, "labctl")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	// Offer the memory controller to the children (root's and ours).
	for _, d := range []string{cgroupRoot, parent} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(parent, fmt.Sprintf("manager-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.FormatUint(limit, 10)), 0o644); err != nil {
		_ = os.Remove(dir)
		return "", err
	}
	_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0o644)
	return dir, nil
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
	if e.cgroup != "" && oomKills(e.cgroup) > 0 {
		return fmt.Sprintf("it exceeded its memory limit of %s", human(e.lim.Memory))
	}
	return ""
}

// afterExit kills whatever the manager left behind in its cgroup.
func (e *enforcer) afterExit() {
	if e == nil || e.cgroup == "" {
		return
	}
	_ = os.WriteFile(filepath.Join(e.cgroup, "cgroup.kill"), []byte("1"), 0o644)
}

// close removes the cgroup (empty by then).
func (e *enforcer) close() {
	if e == nil || e.cgroup == "" {
		return
	}
	e.afterExit()
	waitUnpopulated(e.cgroup, time.Second)
	_ = os.Remove(e.cgroup)
}

func oomKills(dir string) int {
	f, err := os.Open(filepath.Join(dir, "memory.events"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if k == "oom_kill" {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
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
