//go:build linux

// Package sandbox runs untrusted code (a student's build and manager) as
// an unprivileged user in its own mount and pid namespaces, where only
// what the grader binds in is visible: the submission's private copy, a
// scratch home, the manager's kubeconfig, and the machine's programs and
// configuration (read-only). Its root is built up from that allow-list and
// pivoted into: everything else (the grader's home with ~/.kube and
// labctl's caches, the grading work and output directories, other
// submissions, every cluster's PKI and state) does not exist inside.
//
// The kernel does the work; no external tool is needed. The sandboxed
// command is started through the labctl executable itself (or a test
// binary) re-executed with LABCTL_SANDBOX set: that helper runs as root in
// the new namespaces, sets up the mounts, drops to the sandbox's uid
// (no capabilities, no_new_privs, no new user namespaces: see
// seccomp_linux.go) and executes the command. Programs that
// may start one call MaybeRun first thing (supervise.MaybeRun does).
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Cloneflags are the namespaces every sandboxed command gets.
const Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID

func namespaced() *syscall.SysProcAttr { return &syscall.SysProcAttr{Cloneflags: Cloneflags} }

// Command returns argv run in the sandbox: the helper (this executable)
// in new mount and pid namespaces, in its own process group, killed when
// its parent dies. attr may carry more (a cgroup); nil is fine.
func (s *Spec) Command(argv []string, attr *syscall.SysProcAttr) (*exec.Cmd, error) {
	if s.UID <= 0 || s.GID <= 0 {
		return nil, errors.New("sandbox: a sandbox needs a non-root uid and gid")
	}
	if len(argv) == 0 {
		return nil, errors.New("sandbox: nothing to run")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec := *s
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, argv...)
	cmd.Env = []string{EnvVar + "=" + string(raw)}
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Cloneflags |= Cloneflags
	attr.Setpgid = true
	attr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr = attr
	return cmd, nil
}

// MaybeRun is the helper: when this process was started by Command it
// sets the sandbox up, executes the command and never returns (exit 126
// when the set-up fails, with the reason on stderr).
func MaybeRun() {
	raw, ok := os.LookupEnv(EnvVar)
	if !ok {
		return
	}
	var s Spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fail(fmt.Errorf("bad spec: %w", err))
	}
	if err := s.enter(os.Args[1:]); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "labctl sandbox:", err)
	os.Exit(SetupFailed)
}

// enter builds the mount table, drops privileges and executes argv.
func (s *Spec) enter(argv []string) error {
	if len(argv) == 0 || s.UID <= 0 || s.GID <= 0 {
		return errors.New("no command or no unprivileged uid")
	}
	// Nothing mounted here propagates back to the machine.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// Sources are opened before anything is hidden: binds re-expose parts
	// of hidden trees through these descriptors.
	open := func(p string) (string, error) {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", fmt.Errorf("open %s: %w", p, err)
		}
		return fmt.Sprintf("/proc/self/fd/%d", fd), nil
	}
	bindSrc := make([]string, len(s.Binds))
	for i, b := range s.Binds {
		var err error
		if bindSrc[i], err = open(b.Src); err != nil {
			return err
		}
	}
	layers := make([][3]string, len(s.Overlays)) // lower, upper, work
	for i, o := range s.Overlays {
		for j, p := range []string{o.Lower, o.Upper, o.Work} {
			var err error
			if layers[i][j], err = open(p); err != nil {
				return err
			}
		}
	}

	// The sandbox's root is built up from nothing (an allow-list): a
	// fresh tmpfs holding the system's programs and configuration
	// (systemDirs, read-only), a minimal /dev, private scratch
	// directories, the binds and overlays, and a /proc of its own. Then
	// it becomes / (pivot_root) and the machine's root is detached:
	// nothing else of the machine exists inside, not even as a mount
	// point in /proc/self/mountinfo.
	const newRoot = "/tmp" // covered, in this mount namespace only
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return fmt.Errorf("new root: %w", err)
	}
	in := func(p string) string { return filepath.Join(newRoot, p) }
	for _, d := range systemDirs {
		info, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case info.Mode()&os.ModeSymlink != 0: // /bin -> usr/bin on a merged /usr
			target, err := os.Readlink(d)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, in(d)); err != nil {
				return err
			}
		case info.IsDir():
			if err := bindReadOnly(d, in(d)); err != nil {
				return err
			}
		}
	}
	if err := minimalDev(in("/dev")); err != nil {
		return err
	}

	hide := slices.Clone(s.Hide)
	slices.SortFunc(hide, byDepth)
	for _, p := range hide {
		info, err := os.Stat(in(p))
		if err != nil {
			continue // not in the sandbox's root at all
		}
		if info.IsDir() {
			err = unix.Mount("tmpfs", in(p), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m")
		} else {
			err = unix.Mount("/dev/null", in(p), "", unix.MS_BIND, "")
		}
		if err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	for _, p := range s.Scratch {
		if err := os.MkdirAll(in(p), 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", in(p), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=512m"); err != nil {
			return fmt.Errorf("scratch %s: %w", p, err)
		}
	}
	order := make([]int, len(s.Binds))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return byDepth(s.Binds[a].Dst, s.Binds[b].Dst) })
	for _, i := range order {
		b := s.Binds[i]
		dst := in(b.Dst)
		if err := mountPoint(dst, bindSrc[i]); err != nil {
			return err
		}
		if err := unix.Mount(bindSrc[i], dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", b.Dst, err)
		}
		if !b.Writable {
			if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
				return fmt.Errorf("make %s read-only: %w", b.Dst, err)
			}
		}
	}
	for i, o := range s.Overlays {
		if err := os.MkdirAll(in(o.Dst), 0o755); err != nil {
			return err
		}
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", layers[i][0], layers[i][1], layers[i][2])
		if err := unix.Mount("overlay", in(o.Dst), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("overlay %s: %w", o.Dst, err)
		}
	}
	// A /proc of the new pid namespace: the command sees only its own
	// processes, so it can signal nothing of the grader's.
	if err := os.MkdirAll(in("/proc"), 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", in("/proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := os.Chmod(newRoot, 0o755); err != nil {
		return err
	}
	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	// pivot_root(".", "."): the new root on top, the old one under it at
	// the same place, then detached.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the machine's root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make / read-only: %w", err)
	}

	path, err := lookPath(argv[0], s.Env)
	if err != nil {
		return err
	}
	if s.Dir != "" {
		if err := os.Chdir(s.Dir); err != nil {
			return err
		}
	}
	// no_new_privs, the parent-death signal, the seccomp filter and the
	// priority are the calling thread's: this goroutine stays on it until
	// the exec.
	runtime.LockOSThread()
	if s.Nice > 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, s.Nice); err != nil {
			return fmt.Errorf("setpriority: %w", err)
		}
	}
	// Drop root: no supplementary groups, the sandbox's gid and uid (all
	// capabilities go with uid 0), and no way back through set-uid
	// programs.
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(s.GID, s.GID, s.GID); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setresuid(s.UID, s.UID, s.UID); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	// A change of credentials clears the parent-death signal: set it again.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
	if err := denyUserNamespaces(); err != nil {
		return err
	}
	return syscall.Exec(path, argv, s.Env)
}

// systemDirs are what a sandbox sees of the machine: its programs,
// libraries and configuration (read-only; a merged /usr's links are
// copied as links). Nothing else: not /opt, /var, /srv, /home, /root,
// /run, /mnt, /media, /sys, the grading work directory or the machine's
// own /tmp.
var systemDirs = []string{"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// devices are the device nodes a sandbox's /dev holds (bound from the
// machine's): what programs open by name.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// bindReadOnly bind-mounts src (a directory of the machine) at dst,
// read-only, with no set-uid programs or devices.
func bindReadOnly(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", src, err)
	}
	return nil
}

// minimalDev builds dev: the common device nodes, the links into
// /proc/self/fd, and /dev/shm (a scratch directory when asked).
func minimalDev(dev string) error {
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range devices {
		src := "/dev/" + d
		if _, err := os.Stat(src); err != nil {
			continue
		}
		dst := filepath.Join(dev, d)
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", src, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return nil
}

// mountPoint makes sure dst exists as a directory or a file, like src.
func mountPoint(dst, src string) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if info.IsDir() {
		return os.MkdirAll(dst, 0o755)
	}
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o444)
	if err != nil {
		return err
	}
	return f.Close()
}

// byDepth orders paths parents first.
func byDepth(a, b string) int {
	return strings.Count(filepath.Clean(a), "/") - strings.Count(filepath.Clean(b), "/")
}

// lookPath resolves a command name on the sandbox's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(v) {
				p := filepath.Join(dir, name)
				if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
					return p, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s not found on the sandbox's PATH", name)
}
