package cgroup

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// root is where the cgroup file systems are mounted.
const root = "/sys/fs/cgroup"

// Detect says which hierarchy New would use: v2 when /sys/fs/cgroup is a
// writable unified tree offering one of pids, memory and cpu, else v1
// when the caller's own group in one of those controllers' trees is
// writable.
func Detect() Support {
	if s, ok := detectV2(); ok {
		return s
	}
	if mounts := v1Mounts(); len(mounts) > 0 {
		s := Support{Version: 1}
		for _, c := range wanted {
			if dir, ok := mounts[c]; ok && writable(dir) {
				s.Controllers = append(s.Controllers, c)
			}
		}
		if len(s.Controllers) > 0 {
			return s
		}
		return Support{Reason: "the cgroup v1 trees are not writable (run as root, with /sys/fs/cgroup writable)"}
	}
	var st unix.Statfs_t
	if unix.Statfs(root, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return Support{Reason: "cgroup v2 at " + root + " is not writable or offers none of pids, memory, cpu (run as root)"}
	}
	return Support{Reason: "no cgroup file system at " + root}
}

func detectV2() (Support, bool) {
	var st unix.Statfs_t
	if unix.Statfs(root, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return Support{}, false
	}
	raw, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil || !writable(root) {
		return Support{}, false
	}
	s := Support{Version: 2}
	have := strings.Fields(string(raw))
	for _, c := range wanted {
		for _, h := range have {
			if h == c {
				s.Controllers = append(s.Controllers, c)
			}
		}
	}
	return s, len(s.Controllers) > 0
}

func writable(path string) bool { return unix.Access(path, unix.W_OK) == nil }

// v1Mounts maps each wanted v1 controller to this process's own group
// in its tree (mount point joined with the path /proc/self/cgroup gives,
// relative to the mount's root).
func v1Mounts() map[string]string {
	own := ownGroups()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent dev root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 || qf[0] != "cgroup" {
			continue
		}
		mountRoot, mountPoint := unescape(pf[3]), unescape(pf[4])
		for _, opt := range strings.Split(qf[2], ",") {
			for _, c := range wanted {
				if opt != c {
					continue
				}
				p, ok := own[c]
				if !ok {
					continue
				}
				rel, err := filepath.Rel(mountRoot, p)
				if err != nil || strings.HasPrefix(rel, "..") {
					rel = "."
				}
				out[c] = filepath.Join(mountPoint, rel)
			}
		}
	}
	return out
}

// ownGroups reads /proc/self/cgroup: each v1 controller's group path, and
// the v2 group's under "".
func ownGroups() map[string]string {
	raw, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// New makes the group name with lim in the hierarchy Detect finds: on
// v2 under /sys/fs/cgroup/labctl (or nested in the labctl group the
// caller runs in), on v1 under the caller's own group in each tree. A
// leftover group of that name (from a run that crashed) is emptied and
// replaced.
func New(name string, lim Limits) (Group, error) {
	s := Detect()
	if err := s.covers(lim); err != nil {
		return nil, err
	}
	switch s.Version {
	case 2:
		return newV2(Name(name), lim, s)
	case 1:
		return newV1(Name(name), lim, s)
	}
	return nil, ErrUnsupported
}

// Pids lists the processes in the group at dir (its cgroup.procs) and in
// the groups below it.
func Pids(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		raw, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeTree deletes a group and the groups below it, deepest first.
func removeTree(dir string) error {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			_ = removeTree(filepath.Join(dir, e.Name()))
		}
	}
	if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
		return &os.PathError{Op: "remove cgroup", Path: dir, Err: err}
	}
	return nil
}

// writeFile writes one value into a cgroup file.
func writeFile(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmtLimitErr(file, err)
	}
	return nil
}

// counter reads "key N" from a flat-keyed cgroup file (0 when absent).
func counter(path, key string) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, _ := strings.Cut(line, " ")
		if k == key {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
