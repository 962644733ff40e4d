package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// v1 is a group in each controller's tree: <own group>/labctl/<name>.
type v1 struct {
	dirs map[string]string // controller -> directory
}

const v1Period = 100_000 // µs, the CFS default

func newV1(name string, lim Limits, s Support) (Group, error) {
	mounts := v1Mounts()
	g := &v1{dirs: map[string]string{}}
	for _, c := range s.Controllers {
		dir := filepath.Join(mounts[c], "labctl", name)
		if _, err := os.Stat(dir); err == nil {
			(&v1{dirs: map[string]string{c: dir}}).Kill()
			_ = removeTree(dir)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			_ = g.Remove()
			return nil, err
		}
		g.dirs[c] = dir
	}
	if err := g.limit(lim); err != nil {
		_ = g.Remove()
		return nil, err
	}
	return g, nil
}

func (g *v1) limit(lim Limits) error {
	if dir, ok := g.dirs["pids"]; ok && lim.Pids > 0 {
		if err := writeFile(dir, "pids.max", strconv.FormatInt(lim.Pids, 10)); err != nil {
			return err
		}
	}
	if dir, ok := g.dirs["memory"]; ok && lim.Memory > 0 {
		if err := writeFile(dir, "memory.limit_in_bytes", strconv.FormatInt(lim.Memory, 10)); err != nil {
			return err
		}
		// Memory and swap together: no swap beyond the limit (the file
		// exists only with swap accounting).
		_ = writeFile(dir, "memory.memsw.limit_in_bytes", strconv.FormatInt(lim.Memory, 10))
	}
	if dir, ok := g.dirs["cpu"]; ok {
		if lim.CPUWeight > 0 {
			if err := writeFile(dir, "cpu.shares", strconv.Itoa(max(2, lim.CPUWeight*1024/100))); err != nil {
				return err
			}
		}
		if lim.CPUs > 0 {
			if err := writeFile(dir, "cpu.cfs_period_us", strconv.Itoa(v1Period)); err != nil {
				return err
			}
			if err := writeFile(dir, "cpu.cfs_quota_us", strconv.Itoa(int(lim.CPUs*v1Period))); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *v1) Path() string {
	for _, c := range wanted {
		if d, ok := g.dirs[c]; ok {
			return d
		}
	}
	return ""
}

// StartInside: v1 has no CLONE_INTO_CGROUP.
func (g *v1) StartInside(*syscall.SysProcAttr) (func(), bool, error) { return func() {}, false, nil }

func (g *v1) Add(pid int) error {
	for _, dir := range g.dirs {
		if err := writeFile(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (g *v1) OOMKills() int {
	dir, ok := g.dirs["memory"]
	if !ok {
		return 0
	}
	return counter(filepath.Join(dir, "memory.oom_control"), "oom_kill")
}

// Kill: v1 has no cgroup.kill, so every process is killed by pid, pass
// after pass, until none is left (one forking meanwhile is caught by the
// next pass; at the pids limit it cannot fork at all).
func (g *v1) Kill() {
	deadline := time.Now().Add(killWait)
	for {
		found := false
		for _, dir := range g.dirs {
			for _, pid := range Pids(dir) {
				found = true
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if !found || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (g *v1) Remove() error {
	g.Kill()
	var errs []error
	for _, dir := range g.dirs {
		// A killed process leaves its group when it is reaped: wait a
		// little for its parent.
		var err error
		for i := 0; i < 100; i++ {
			if err = removeTree(dir); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		errs = append(errs, err)
		_ = syscall.Rmdir(filepath.Dir(dir)) // labctl/, when no other box uses it
	}
	return errors.Join(errs...)
}
