// Package testkind assembles, for tests only, a minimal kind node image
// without a registry: a FROM-scratch image holding a real containerd, ctr
// and crictl built from the Go module proxy, a static init that runs
// containerd, and the three shell tools kind execs in a node (cat, mkdir,
// cp). It runs no kubelet and no systemd: enough for kind's nodeutils
// (image load, `crictl inspecti`) and for kind's create path up to the
// kubeadm config, never a node image for users (they get kind's own).
package testkind

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/fslock"
	"github.com/labctl/labctl/internal/xdg"
)

// Versions pins what goes into the node image.
type Versions struct {
	// Containerd is github.com/containerd/containerd/v2 (containerd, ctr).
	Containerd string
	// CriTools is sigs.k8s.io/cri-tools (crictl).
	CriTools string
	// Kubernetes is what /kind/version says: kind picks the kubeadm API
	// version from it. The same as the local control plane's.
	Kubernetes string
}

// DefaultVersions are containerd 2.4 (the line kind v0.33's node image
// ships) and crictl of the control plane's minor.
func DefaultVersions() Versions {
	return Versions{Containerd: "v2.4.2", CriTools: "v1.37.0", Kubernetes: controlplane.DefaultVersions().Kubernetes}
}

// key names the cache directory of the binaries.
func (v Versions) key() string {
	return fmt.Sprintf("containerd-%s-crictl-%s-%s-%s", v.Containerd, v.CriTools, runtime.Version(), runtime.GOARCH)
}

// Executables are the binaries Binaries builds.
var Executables = []string{"containerd", "ctr", "crictl"}

// CacheDir is $XDG_CACHE_HOME/labctl/testkind (or the OS user cache dir).
func CacheDir() (string, error) {
	return xdg.CacheDir("testkind")
}

// Binaries returns a directory with static containerd, ctr and crictl of
// versions v, building them with `go install pkg@version` (each module with
// its own go.mod) on first use. containerd is built without the btrfs,
// devmapper and zfs snapshotters (they need cgo); the node uses the native
// snapshotter. log gets the build's output (may be nil).
func Binaries(ctx context.Context, v Versions, log io.Writer) (string, error) {
	root, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, v.key())
	if complete(dir) {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	// Parallel test packages build the same binaries: one builds, the
	// others wait and find them.
	unlock, err := fslock.Lock(ctx, dir+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(dir) {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(root, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if log == nil {
		log = io.Discard
	}
	containerd := "github.com/containerd/containerd/v2/cmd/"
	builds := [][]string{
		{"-tags", "no_btrfs no_devmapper no_zfs", containerd + "containerd@" + v.Containerd, containerd + "ctr@" + v.Containerd},
		{"sigs.k8s.io/cri-tools/cmd/crictl@" + v.CriTools},
	}
	for _, b := range builds {
		args := append([]string{"install", "-trimpath", "-ldflags=-s -w"}, b...)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOBIN="+tmp)
		tail := &engine.TailBuffer{Max: 4 << 10}
		cmd.Stdout, cmd.Stderr = io.MultiWriter(log, tail), io.MultiWriter(log, tail)
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(tail.String()))
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

func complete(dir string) bool {
	for _, e := range Executables {
		if st, err := os.Stat(filepath.Join(dir, e)); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
