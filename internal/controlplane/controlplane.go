// Package controlplane provides the Kubernetes control-plane binaries the
// local provider runs: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok. Online it downloads the official release
// binaries of the pinned versions, checksum-verified (seconds); where that
// is impossible (offline, a missing checksum, another OS) it builds them
// from the Go module proxy as ONE multi-call binary (minutes). Either way
// once per version, into the user's cache; prebuilt binaries are used when
// given.
package controlplane

import (
	"github.com/labctl/labctl/internal/xdg"
	"os"
	"path/filepath"
)

// Components are the executables a Binaries directory holds.
var Components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// Versions pins what is built.
type Versions struct {
	Kubernetes string // k8s.io/kubernetes; staging modules use v0.<minor>.<patch>
	Etcd       string // go.etcd.io/etcd/server/v3 (must be v3.7.x for kwok v0.8)
	Kwok       string // sigs.k8s.io/kwok
}

// DefaultVersions returns the versions this labctl release is tested with.
func DefaultVersions() Versions {
	return Versions{Kubernetes: "v1.37.2", Etcd: "v3.7.3", Kwok: "v0.8.0"}
}

// Key names the cache directory for these versions.
func (v Versions) Key() string { return v.Kubernetes + "-etcd" + v.Etcd + "-kwok" + v.Kwok }

// Binaries is a directory with one executable (or symlink) per component.
type Binaries struct {
	Dir string
	// Source says where they came from: "cache", "downloaded", "built",
	// "--bin-dir", "KUBEBUILDER_ASSETS".
	Source string
}

// Path returns the executable for a component.
func (b *Binaries) Path(component string) string { return filepath.Join(b.Dir, component) }

// Missing lists the components dir lacks (empty when complete).
func Missing(dir string) []string {
	var missing []string
	for _, c := range Components {
		st, err := os.Stat(filepath.Join(dir, c))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, c)
		}
	}
	return missing
}

// DefaultCacheDir is $XDG_CACHE_HOME/labctl/controlplane (or the OS default
// user cache dir).
func DefaultCacheDir() (string, error) {
	labctl, err := xdg.CacheDir()
	if err != nil {
		return "", err
	}
	return CacheDirIn(labctl), nil
}

// CacheDirIn is where the binaries are cached under labctl's cache dir
// (doctor looks there for another cache root it is given).
func CacheDirIn(labctlCache string) string {
	return filepath.Join(labctlCache, "controlplane")
}
