package grade

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/labctl/labctl/internal/cgroup"
)

// A box (the child labctl and everything under it: the cluster's etcd
// and API server, the build, the manager) is one cgroup with limits on
// the whole: a fork bomb stops at its pids limit, a memory hog is killed
// by the kernel inside the box, and boxes together yield the CPU to the
// grader. Supervise's per-manager limits still hold inside it. Where
// cgroups cannot be written (not root, a read-only /sys), grading goes
// on with the per-process limits only, and says so.

// Defaults of a box's limits.
const (
	// DefaultBoxPids bounds a box's processes and threads: a cluster, a
	// go build and a manager use a few hundred.
	DefaultBoxPids = 4096
	// DefaultBoxMemory bounds a box's memory: the API server and etcd
	// take ~0.5 GiB, a go build 1-2 GiB, the manager its own limit.
	DefaultBoxMemory = 4 << 30
	// DefaultBoxCPUWeight is a box's share of contended CPU: a normal
	// process's (100). The box holds the cluster and the checks' own
	// timing as well as the submission, so a lower weight would let any
	// other load on the machine slow its verdict (on cgroup v1 a group's
	// shares compete with every single process beside it); boxes share
	// the CPU evenly with each other, which is what keeps one submission
	// from starving its neighbours.
	DefaultBoxCPUWeight = 100
)

// DefaultBoxLimits are a box's limits on this machine: at most half of
// its memory, all of its cores.
func DefaultBoxLimits() cgroup.Limits {
	mem := int64(DefaultBoxMemory)
	if total := memTotal(); total > 0 {
		mem = min(mem, int64(total/2))
	}
	return cgroup.Limits{Pids: DefaultBoxPids, Memory: mem, CPUWeight: DefaultBoxCPUWeight, CPUs: float64(runtime.NumCPU())}
}

// describeBoxLimits is the run's header line about boxes.
func describeBoxLimits(l *cgroup.Limits, s cgroup.Support) string {
	if l == nil {
		return "each box: no limits on the whole (limits are off)"
	}
	if s.Version == 0 {
		return "each box: per-process limits only (" + s.Reason + ")"
	}
	return fmt.Sprintf("each box: %d processes, memory %s, CPU weight %d, through %s", l.Pids, humanBytes(l.Memory), l.CPUWeight, s)
}

func humanBytes(b int64) string {
	if b >= 1<<30 && b%(1<<30) == 0 {
		return fmt.Sprintf("%dGiB", b>>30)
	}
	return fmt.Sprintf("%dMiB", b>>20)
}

// boxGroupName names the cgroup of a student's box in one run (the box's
// directory is unique to both).
func boxGroupName(student, boxRoot string) string {
	h := fnv.New32a()
	_, _ = io.WriteString(h, boxRoot)
	return cgroup.Name(fmt.Sprintf("box-%s-%08x", student, h.Sum32()))
}

// launchBox starts cmd (the child labctl) in a new cgroup with lim (nil:
// none) and then gives it job on its stdin. On v2 the child starts in
// the group; on v1 it is moved in before it reads its job, so before it
// can have forked. The group is nil, with a note saying why, when cgroups
// could not be used. stdout must be set up (StdoutPipe) before.
func launchBox(cmd *exec.Cmd, name string, lim *cgroup.Limits, job []byte) (cgroup.Group, string, error) {
	var group cgroup.Group
	note := ""
	if lim != nil {
		var err error
		if group, err = cgroup.New(name, *lim); err != nil {
			// No cgroups here at all is the run's header line, not each
			// submission's note.
			if !errors.Is(err, cgroup.ErrUnsupported) {
				note = "its box ran with per-process limits only (cgroup: " + err.Error() + ")"
			}
			group = nil
		}
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	release, inside := func() {}, false
	if group != nil {
		var err error
		if release, inside, err = group.StartInside(cmd.SysProcAttr); err != nil {
			_ = group.Remove()
			group, note, release = nil, "its box ran with per-process limits only (cgroup: "+err.Error()+")", func() {}
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		release()
		removeGroup(group)
		return nil, "", err
	}
	err = cmd.Start()
	release()
	if err != nil {
		removeGroup(group)
		return nil, "", fmt.Errorf("cannot start its box: %w", err)
	}
	if group != nil && !inside {
		if err := group.Add(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			removeGroup(group)
			return nil, "", fmt.Errorf("cannot put its box in cgroup %s: %w", group.Path(), err)
		}
	}
	go func() {
		// A box that dies early closes its end: its exit says why.
		_, _ = stdin.Write(job)
		_ = stdin.Close()
	}()
	return group, note, nil
}

func removeGroup(g cgroup.Group) {
	if g != nil {
		_ = g.Remove()
	}
}

// boxEndedNote explains a box that ended early when its group's memory
// limit killed something in it.
func boxEndedNote(g cgroup.Group, lim *cgroup.Limits) string {
	if g == nil || lim == nil {
		return ""
	}
	if n := g.OOMKills(); n > 0 {
		return fmt.Sprintf(" (its box reached its memory limit of %s: the kernel killed %d process(es))", humanBytes(lim.Memory), n)
	}
	return ""
}

// memTotal reads MemTotal from /proc/meminfo in bytes (0 if unknown).
func memTotal() uint64 {
	return meminfoBytes("MemTotal:")
}
