// Package nodeimage builds a kind node image where no registry answers (an
// air-gapped classroom, this project's machines), as kind's own
// `build node-image` would make it: a Debian root file system from
// debootstrap with kind's base files (entrypoint, systemd units, containerd
// configuration, taken from the pinned kind module), containerd, ctr,
// crictl and the runc shim built from the Go module proxy, kubelet,
// kubeadm, kubectl and kube-proxy built from k8s.io/kubernetes at the
// pinned version, and the images kubeadm asks for (kube-apiserver,
// kube-controller-manager, kube-scheduler, kube-proxy, etcd, pause)
// preloaded into the node's containerd under the exact names kind's
// kubeadm configuration uses. Built once, cached by content.
package nodeimage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/xdg"
)

// Versions pin everything that goes into the image.
type Versions struct {
	// Kubernetes is k8s.io/kubernetes (kubelet, kubeadm, kubectl,
	// kube-proxy and the control-plane images).
	Kubernetes string
	// Kind is sigs.k8s.io/kind, whose images/base/files the node carries.
	Kind string
	// Containerd is github.com/containerd/containerd/v2.
	Containerd string
	// CriTools is sigs.k8s.io/cri-tools (crictl).
	CriTools string
	// Debian is the suite debootstrap installs.
	Debian string
	// CoreDNS is github.com/coredns/coredns, the version kubeadm deploys
	// (its constants.CoreDNSVersion).
	CoreDNS string
}

// DefaultVersions are the Kubernetes of the local control plane, kind
// v0.33.0 (what labctl links), containerd 2.4 and Debian bookworm, whose
// systemd (252) still boots on cgroup v1 hosts (trixie's 257 refuses).
func DefaultVersions() Versions {
	return Versions{
		Kubernetes: controlplane.DefaultVersions().Kubernetes,
		Kind:       "v0.33.0",
		Containerd: "v2.4.2",
		CriTools:   "v1.37.0",
		Debian:     "bookworm",
		CoreDNS:    "v1.14.6",
	}
}

// Packages are the Debian packages of the node: what kindest/base installs
// (systemd, iptables, mount, conntrack, ethtool, socat...), plus runc and
// the CNI plugins, which kind builds and Debian packages.
var Packages = []string{
	"systemd", "systemd-sysv", "dbus",
	"runc", "containernetworking-plugins",
	"conntrack", "iptables", "nftables", "ebtables", "iproute2", "ethtool", "socat",
	"util-linux", "mount", "kmod", "libseccomp2", "pigz", "fuse-overlayfs",
	"e2fsprogs", "bash", "ca-certificates", "curl", "jq", "procps", "findutils", "hostname",
}

// Options say what to build and where.
type Options struct {
	Versions Versions
	// Tag names the image; default Reference(Versions).
	Tag string
	// CacheDir holds the root file system, binaries and work files;
	// default $XDG_CACHE_HOME/labctl/nodeimage.
	CacheDir string
	// ControlPlane is the control-plane binaries directory (etcd,
	// kube-apiserver, ...); default controlplane.Ensure.
	ControlPlane string
	// Engine runs docker (or podman), debootstrap and tar.
	Engine *engine.Engine
	// Runner runs the host commands (debootstrap, tar, go); default the
	// engine's runner.
	Runner engine.Runner
	// Progress receives one line per step.
	Progress func(format string, args ...any)
	// Log receives the commands' output (may be nil).
	Log io.Writer
	// Force rebuilds even when the tagged image exists.
	Force bool
}

// Result is a built (or found) image.
type Result struct {
	Ref string
	// Cached is true when the image already existed.
	Cached bool
	// Steps are the phases run and how long each took.
	Steps []Step
}

// Step is one phase of a build.
type Step struct {
	Name     string
	Duration time.Duration
}

// Reference is the image name for versions v: its tag carries the
// Kubernetes version and a digest of everything that goes in, so a change
// of version, package list or node file builds a new image.
func Reference(v Versions) string {
	return "labctl/kind-node:" + v.Kubernetes + "-" + Key(v)[:12]
}

// Key digests the versions, the package list and the files labctl adds.
func Key(v Versions) string {
	h := sha256.New()
	fmt.Fprintf(h, "%+v\n%s\n%s\n", v, strings.Join(Packages, ","), nodeDockerfile)
	for _, f := range assetNames() {
		fmt.Fprintf(h, "%s\n", f)
		b, _ := assets.ReadFile(f)
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// BaseReference names the imported Debian file system: it changes with the
// suite and the package list only, so a new Kubernetes version or node
// file reuses it.
func BaseReference(v Versions) string {
	h := sha256.Sum256([]byte(v.Debian + "\n" + strings.Join(Packages, ",")))
	return "labctl/kind-base:" + v.Debian + "-" + hex.EncodeToString(h[:])[:12]
}

// DefaultCacheDir is $XDG_CACHE_HOME/labctl/nodeimage.
func DefaultCacheDir() (string, error) { return xdg.CacheDir("nodeimage") }

// assetNames lists every embedded file, sorted.
func assetNames() []string {
	var names []string
	_ = fs.WalkDir(assets, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	sort.Strings(names)
	return names
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

func (o *Options) defaults() error {
	if o.Versions == (Versions{}) {
		o.Versions = DefaultVersions()
	}
	if o.Tag == "" {
		o.Tag = Reference(o.Versions)
	}
	if o.CacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil {
			return err
		}
		o.CacheDir = dir
	}
	if o.Runner == nil {
		o.Runner = o.Engine.Runner
	}
	return os.MkdirAll(o.CacheDir, 0o755)
}
