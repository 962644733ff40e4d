package sandbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/labctl/labctl/internal/cgroup"
	"github.com/labctl/labctl/internal/filecopy"
)

// UID range of sandboxes: far above any account's uid, no /etc/passwd
// entry needed. Each submission gets its own, so no two sandboxes share
// files or can signal each other.
const (
	uidBase = 1_900_000_000
	uidSpan = 100_000_000
)

// UIDFor is the sandbox uid (and gid) of a key (a grading run's work
// directory and a student).
func UIDFor(key string) int {
	h := fnv.New32a()
	_, _ = io.WriteString(h, key)
	return uidBase + int(h.Sum32()%uidSpan)
}

// Box is one submission's sandbox on disk, under Root (root-owned):
//
//	src/      the private copy of the submission, owned by root, read-only to the sandbox
//	home/     the sandbox's HOME and scratch, owned by the sandbox's uid
//	gocache/  the upper layer of its Go build cache (see GoCache); gocache-N/
//	          more, for commands that run at once
type Box struct {
	Root string
	UID  int
	GID  int
	// Hide is what every spec of this box hides (see Spec.Hide).
	Hide []string

	mu     sync.Mutex
	layers []string // GoCache's layers not in use
	made   int      // GoCache's layers made so far
}

// Src is the private copy of the submission.
func (b *Box) Src() string { return filepath.Join(b.Root, "src") }

// Home is the sandbox's home directory, writable by it.
func (b *Box) Home() string { return filepath.Join(b.Root, "home") }

// NewBox creates the box's directories. The root is root-owned and
// readable (the sandbox must traverse it), home belongs to the uid.
func NewBox(root string, uid int, hide []string) (*Box, error) {
	b := &Box{Root: root, UID: uid, GID: uid, Hide: hide}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.Home(), 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(b.Home(), uid, uid); err != nil {
		return nil, err
	}
	return b, nil
}

// Spec is a spec for a command of this box: its environment (HOME and
// TMPDIR set here), the box's hidden paths, a private /tmp, and binds:
// the private copy (read-only), home (writable) and extra.
func (b *Box) Spec(dir string, env []string, extra ...Bind) *Spec {
	binds := append([]Bind{
		{Src: b.Src(), Dst: b.Src()},
		{Src: b.Home(), Dst: b.Home(), Writable: true},
	}, extra...)
	return &Spec{
		UID: b.UID, GID: b.GID, Dir: dir,
		Env:     append([]string{"HOME=" + b.Home(), "TMPDIR=/tmp", "LANG=C.UTF-8"}, env...),
		Hide:    b.Hide,
		Scratch: []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock"},
		Binds:   binds,
	}
}

// GoCache returns an overlay that shares the grader's Go build cache
// (lower, read-only: the sandbox cannot poison it) with writes going to
// the box, the GOCACHE path inside the sandbox, and release, to call once
// the command that mounts it has ended. Each upper layer holds the
// cache's 256 directories, owned by the sandbox, so the go command can add
// entries. Commands of one box that run at once (a lab's test runs, two at
// a time) get layers of their own: overlayfs mounts must not share an
// upper or work directory (a second mount then fails, or sees the first's
// work directory vanish). One after another, they reuse a layer, and what
// the one before compiled.
func (b *Box) GoCache(lower string) (ov Overlay, dst string, release func(), err error) {
	layer, err := b.takeLayer()
	if err != nil {
		return Overlay{}, "", nil, err
	}
	release = func() {
		b.mu.Lock()
		b.layers = append(b.layers, layer)
		b.mu.Unlock()
	}
	dst = filepath.Join(b.Home(), ".cache", "go-build")
	return Overlay{Lower: lower, Upper: filepath.Join(layer, "upper"), Work: filepath.Join(layer, "work"), Dst: dst}, dst, release, nil
}

// takeLayer is a free layer of GoCache's, made when none is.
func (b *Box) takeLayer() (string, error) {
	b.mu.Lock()
	if n := len(b.layers); n > 0 {
		layer := b.layers[n-1]
		b.layers = b.layers[:n-1]
		b.mu.Unlock()
		return layer, nil
	}
	b.made++
	// The first layer keeps the path layers had before there were several.
	layer := filepath.Join(b.Root, "gocache")
	if b.made > 1 {
		layer = filepath.Join(b.Root, fmt.Sprintf("gocache-%d", b.made))
	}
	b.mu.Unlock()
	upper, work := filepath.Join(layer, "upper"), filepath.Join(layer, "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	for i := 0; i < 256; i++ {
		d := filepath.Join(upper, fmt.Sprintf("%02x", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
		if err := os.Chown(d, b.UID, b.GID); err != nil {
			return "", err
		}
	}
	if err := os.Chown(upper, b.UID, b.GID); err != nil {
		return "", err
	}
	return layer, nil
}

// Remove deletes the box (files the sandbox created included).
func (b *Box) Remove() error { return os.RemoveAll(b.Root) }

// CopyLimits bound a copy: a submission is untrusted, and its size, its
// number of files and the time copying it takes are all the grader's.
type CopyLimits struct {
	Bytes int64 // sum of the files' sizes
	Files int   // files and directories
}

// CopyTree copies a submission into dst: directories and regular files
// only (no symbolic links, devices or sockets, so nothing in the copy
// points outside it), without .git and bin/, owned by the caller and
// read-only to everyone else, within lim (zero fields: no bound) and
// until ctx ends.
func CopyTree(ctx context.Context, src, dst string, lim CopyLimits) error {
	var total int64
	files := 0
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("copying the submission took too long: %w", err)
		}
		if files++; lim.Files > 0 && files > lim.Files {
			return fmt.Errorf("the submission has more than %d files and directories", lim.Files)
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if rel != "." && (d.Name() == ".git" || rel == "bin") {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if total += info.Size(); lim.Bytes > 0 && total > lim.Bytes {
			return fmt.Errorf("the submission is larger than %d MiB", lim.Bytes>>20)
		}
		mode := os.FileMode(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		if err := filecopy.Into(target, os.O_EXCL, mode, p); err != nil {
			return err
		}
		return os.Chtimes(target, info.ModTime(), info.ModTime())
	})
}

// Support says whether this machine can sandbox, and if not, why.
type Support struct {
	OK     bool
	Reason string // what is missing, when !OK
	// Overlay: overlayfs works, so builds share the grader's Go cache.
	Overlay bool
	// Cgroups is how a grading box can be limited as a whole (Version 0:
	// per-process limits only).
	Cgroups cgroup.Support
}

// Probe checks what sandboxing needs: root (to switch to a sandbox uid)
// and mount and pid namespaces (a trivial command is started in them).
func Probe() Support {
	if runtime.GOOS != "linux" {
		return Support{Reason: "sandboxing needs Linux namespaces (on Windows: WSL2)"}
	}
	if os.Geteuid() != 0 {
		return Support{Reason: "labctl is not running as root, so it cannot run submissions as other users (run grade with sudo)"}
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		return Support{Reason: "no `true` command to probe namespaces with"}
	}
	cmd := exec.Command(truePath)
	cmd.SysProcAttr = namespaced()
	if err := cmd.Run(); err != nil {
		return Support{Reason: fmt.Sprintf("cannot create mount and pid namespaces (%v); a container may need --privileged or CAP_SYS_ADMIN", err)}
	}
	return Support{OK: true, Overlay: OverlaySupported(), Cgroups: cgroup.Detect()}
}

// OverlaySupported reports whether the kernel offers overlayfs.
func OverlaySupported() bool {
	raw, err := os.ReadFile("/proc/filesystems")
	return err == nil && strings.Contains(string(raw), "\toverlay\n")
}

// ErrUnsupported is returned where sandboxing is needed and impossible.
var ErrUnsupported = errors.New("sandboxing is not possible here")

// GraderSecrets are the places of a grading machine a submission must not
// see: every home directory (the grader's ~/.kube, labctl's caches and
// cluster state, SSH keys), mounted media, and wherever the grader's own
// KUBECONFIG and labctl's XDG directories point.
func GraderSecrets() []string {
	hide := []string{"/root", "/home", "/mnt", "/media", "/srv", "/run/user"}
	if home, err := os.UserHomeDir(); err == nil {
		hide = append(hide, home)
	}
	for _, v := range []string{"XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"} {
		if d := os.Getenv(v); d != "" {
			hide = append(hide, d)
		}
	}
	for _, kc := range filepath.SplitList(os.Getenv("KUBECONFIG")) {
		if kc != "" {
			hide = append(hide, kc)
		}
	}
	return hide
}
