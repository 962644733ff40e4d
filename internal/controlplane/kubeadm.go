package controlplane

import (
	"context"
	_ "embed"
	"os"
	"path/filepath"

	"github.com/labctl/labctl/internal/userr"
)

//go:embed kubeadm/main.go.tmpl
var kubeadmMain []byte

// Program is a main package built against k8s.io/kubernetes at
// Options.Versions.Kubernetes, in a generated module with every staging
// module pinned (the same way as the control plane).
type Program struct {
	// Name names the cached executable and its cache directory
	// (CacheDir/<Name>-<version>/<Name>).
	Name string
	// Module is the generated module's path.
	Module string
	// Main is the source of its main.go.
	Main []byte
}

// Kubeadm returns upstream's kubeadm for opts.Versions.Kubernetes, built
// once from the module proxy (the same generated module as the control
// plane, with cmd/kubeadm as its main) and cached beside the control-plane
// binaries in CacheDir/kubeadm-<version>/kubeadm. Tests use it to validate
// the kubeadm configuration kind renders from labctl's patches.
func Kubeadm(ctx context.Context, opts Options) (string, error) {
	return BuildProgram(ctx, opts, Program{Name: "kubeadm", Module: "labctl.local/kubeadm", Main: kubeadmMain})
}

// BuildProgram returns p's executable, built once per Kubernetes version
// into CacheDir/<Name>-<version>/<Name> (later calls find it there; a
// rebuild relinks from Go's build cache).
func BuildProgram(ctx context.Context, opts Options, p Program) (string, error) {
	if opts.Versions == (Versions{}) {
		opts.Versions = DefaultVersions()
	}
	if opts.CacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil {
			return "", userr.Wrap(err, userr.ExitEnvironment, "no cache directory for "+p.Name, "set XDG_CACHE_HOME")
		}
		opts.CacheDir = dir
	}
	root := filepath.Join(opts.CacheDir, p.Name+"-"+opts.Versions.Kubernetes)
	bin := filepath.Join(root, p.Name)
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", classify(err, "cannot create the cache directory "+root)
	}
	unlock, err := lockFile(ctx, filepath.Join(root, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(bin) {
		return bin, nil
	}
	b := &builder{opts: opts, root: root}
	goBin, err := b.goCmd()
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "src")
	if err := b.prepare(ctx, goBin, src, p.Module, [][2]string{{"k8s.io/kubernetes", opts.Versions.Kubernetes}}, p.Main); err != nil {
		return "", err
	}
	b.progress("compiling %s", p.Name)
	tmp := bin + ".tmp"
	if err := b.compile(ctx, goBin, src, tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", classify(err, "cannot install "+p.Name)
	}
	return bin, nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
