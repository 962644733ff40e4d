package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// v2 is a group <parent>/<name> holding the limits, whose processes live
// in its leaf <name>/procs: the group itself has none, so it can offer
// its controllers to groups nested in it (a box's manager), which v2
// allows only to a group without processes of its own.
type v2 struct {
	dir string
}

// leafName is the leaf of every labctl group, where its processes are.
const leafName = "procs"

const v2Period = 100_000 // µs

func newV2(name string, lim Limits, s Support) (Group, error) {
	parent, nested := v2Parent()
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	// Each group from the root down offers the controllers to its
	// children (the root and labctl's own; a nesting group already does).
	// One at a time: a controller the kernel will not enable (cpu, with
	// real-time threads about) fails alone, and only a limit that needs
	// it fails New.
	rel, _ := filepath.Rel(root, parent)
	dirs := []string{root}
	if rel != "." {
		for _, part := range strings.Split(rel, "/") {
			dirs = append(dirs, filepath.Join(dirs[len(dirs)-1], part))
		}
	}
	var enabled []string
	for _, c := range s.Controllers {
		ok := true
		for _, d := range dirs {
			if writeFile(d, "cgroup.subtree_control", "+"+c) != nil {
				ok = false
				break
			}
		}
		if ok {
			enabled = append(enabled, c)
		}
	}
	s.Controllers = enabled
	if err := s.covers(lim); err != nil {
		return nil, err
	}
	if !nested && lim.CPUWeight > 0 && s.Has("cpu") {
		// Every box together weighs what one box does, beside the
		// machine's other groups (the grader's among them).
		_ = writeFile(parent, "cpu.weight", strconv.Itoa(lim.CPUWeight))
	}
	g := &v2{dir: filepath.Join(parent, name)}
	if _, err := os.Stat(g.dir); err == nil {
		_ = g.Remove()
	}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, err
	}
	if err := g.limit(lim, s); err != nil {
		_ = g.Remove()
		return nil, err
	}
	if len(enabled) > 0 {
		if err := writeFile(g.dir, "cgroup.subtree_control", "+"+strings.Join(enabled, " +")); err != nil {
			_ = g.Remove()
			return nil, err
		}
	}
	if err := os.Mkdir(g.leaf(), 0o755); err != nil {
		_ = g.Remove()
		return nil, err
	}
	return g, nil
}

// v2Parent is where a new group goes: inside the labctl group this
// process runs in (its leaf's parent), so a box's manager stays under
// the box's limits; else /sys/fs/cgroup/labctl.
func v2Parent() (string, bool) {
	own := ownGroups()[""]
	if filepath.Base(own) == leafName && strings.Contains(own+"/", "/labctl/") {
		return filepath.Join(root, filepath.Dir(own)), true
	}
	return filepath.Join(root, "labctl"), false
}

func (g *v2) leaf() string { return filepath.Join(g.dir, leafName) }

func (g *v2) limit(lim Limits, s Support) error {
	if s.Has("pids") && lim.Pids > 0 {
		if err := writeFile(g.dir, "pids.max", strconv.FormatInt(lim.Pids, 10)); err != nil {
			return err
		}
	}
	if s.Has("memory") && lim.Memory > 0 {
		if err := writeFile(g.dir, "memory.max", strconv.FormatInt(lim.Memory, 10)); err != nil {
			return err
		}
		_ = writeFile(g.dir, "memory.swap.max", "0") // absent without swap accounting
	}
	if s.Has("cpu") {
		if lim.CPUWeight > 0 {
			if err := writeFile(g.dir, "cpu.weight", strconv.Itoa(min(10000, lim.CPUWeight))); err != nil {
				return err
			}
		}
		if lim.CPUs > 0 {
			if err := writeFile(g.dir, "cpu.max", fmt.Sprintf("%d %d", int(lim.CPUs*v2Period), v2Period)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *v2) Path() string { return g.dir }

// StartInside opens the leaf for CLONE_INTO_CGROUP: the process is in
// the group from its first instruction.
func (g *v2) StartInside(attr *syscall.SysProcAttr) (func(), bool, error) {
	fd, err := unix.Open(g.leaf(), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, err
	}
	attr.UseCgroupFD, attr.CgroupFD = true, fd
	return func() { _ = unix.Close(fd) }, true, nil
}

func (g *v2) Add(pid int) error {
	return writeFile(g.leaf(), "cgroup.procs", strconv.Itoa(pid))
}

// OOMKills reads memory.events, which counts the groups below too.
func (g *v2) OOMKills() int { return counter(filepath.Join(g.dir, "memory.events"), "oom_kill") }

// Kill writes cgroup.kill (Linux 5.14+; before it, pid by pid) and waits
// until cgroup.events says the group is empty.
func (g *v2) Kill() {
	if writeFile(g.dir, "cgroup.kill", "1") != nil {
		deadline := time.Now().Add(killWait)
		for pids := Pids(g.dir); len(pids) > 0 && time.Now().Before(deadline); pids = Pids(g.dir) {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitUnpopulated(g.dir, killWait)
}

func (g *v2) Remove() error {
	g.Kill()
	return removeTree(g.dir)
}

// waitUnpopulated waits until dir's cgroup.events says "populated 0"
// (cgroup.kill is asynchronous), watching the file with inotify rather
// than sleeping; at most timeout.
func waitUnpopulated(dir string, timeout time.Duration) {
	events := filepath.Join(dir, "cgroup.events")
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, events, unix.IN_MODIFY); err != nil {
		return
	}
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 4096)
	for {
		raw, err := os.ReadFile(events)
		if err != nil || strings.Contains(string(raw), "populated 0") {
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left/time.Millisecond)+1)
		_, _ = unix.Read(fd, buf)
	}
}
