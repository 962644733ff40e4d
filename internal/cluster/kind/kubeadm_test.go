package kind_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kind/pkg/apis/config/defaults"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/controlplane"
)

// TestKubeadmAcceptsWhatKindRenders is the real check of the configuration
// labctl hands to kind: kind's own code (its "Writing configuration" action,
// run on fake nodes) renders the kubeadm config from labctl's patches for
// the pinned node image's Kubernetes version, and upstream kubeadm of the
// control plane's pinned version (built from k8s.io/kubernetes, cached
// beside the control-plane binaries) validates it, for every host variant
// labctl adapts to.
func TestKubeadmAcceptsWhatKindRenders(t *testing.T) {
	if testing.Short() {
		t.Skip("builds upstream kubeadm from k8s.io/kubernetes (minutes the first time) and kind's renderer: not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	started := time.Now()
	kubeadm, err := controlplane.Kubeadm(ctx, controlplane.Options{Progress: func(f string, a ...any) { t.Logf(f, a...) }})
	require.NoError(t, err)
	t.Logf("kubeadm ready after %s", time.Since(started).Round(time.Millisecond))
	render := buildKindRender(ctx, t)
	t.Logf("kubeadm and kind's renderer ready after %s", time.Since(started).Round(time.Millisecond))

	// The pinned node image is kind v0.33's default; its tag is the
	// Kubernetes version kind reads from the node (/kind/version).
	require.Equal(t, defaults.Image, kind.NodeImage)
	version := strings.SplitN(strings.SplitN(kind.NodeImage, ":", 2)[1], "@", 2)[0]
	require.Regexp(t, `^v1\.\d+\.\d+$`, version)

	node := kind.ControlPlaneNode(cluster.DefaultName)
	for _, tt := range []struct {
		name     string
		opts     kind.ConfigOptions
		provider string
		rootless bool
	}{
		{"docker, cgroup v2", kind.ConfigOptions{HTTPPort: 80, HTTPSPort: 443}, "docker", false},
		{"docker, cgroup v1 host", kind.ConfigOptions{HTTPPort: 80, HTTPSPort: 443, CgroupV1: true}, "docker", false},
		{"rootless podman, cgroup v2, high ports", kind.ConfigOptions{HTTPPort: 8080, HTTPSPort: 8443}, "podman", true},
		{"rootless podman, cgroup v1, no ports", kind.ConfigOptions{CgroupV1: true}, "podman", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			o := tt.opts
			o.Name, o.NodeImage = cluster.DefaultName, kind.NodeImage
			o.PolicyHostPath = filepath.Join(dir, "audit-policy.yaml")
			raw, err := yaml.Marshal(kind.ClusterConfig(o))
			require.NoError(t, err)
			kindConfig := filepath.Join(dir, "kind.yaml")
			require.NoError(t, os.WriteFile(kindConfig, raw, 0o644))

			args := []string{"-kubernetes-version", version, "-provider", tt.provider, "-node", node}
			if tt.rootless {
				args = append(args, "-rootless")
			}
			out, err := exec.CommandContext(ctx, render, append(args, kindConfig)...).Output()
			require.NoError(t, err, "kind could not render: %s", stderrOf(err))
			rendered := string(out)
			assert.Contains(t, rendered, "audit-policy-file")
			assert.Contains(t, rendered, "kubernetesVersion: "+version)
			if tt.opts.CgroupV1 {
				assert.Contains(t, rendered, "failCgroupV1: false")
			} else {
				assert.NotContains(t, rendered, "failCgroupV1")
			}
			kubeadmConfig := filepath.Join(dir, "kubeadm.conf")
			require.NoError(t, os.WriteFile(kubeadmConfig, out, 0o644))

			res, err := exec.CommandContext(ctx, kubeadm, "config", "validate", "--config", kubeadmConfig).CombinedOutput()
			require.NoError(t, err, "kubeadm rejects the config kind renders:\n%s\n--- %s:\n%s", res, kubeadmConfig, rendered)
			assert.NotContains(t, string(res), "unknown field", "kubeadm decodes every field strictly")
			assert.Contains(t, string(res), "ok")
		})
	}
}

// buildKindRender builds testdata/kindrender against a copy of kind's
// module (the version labctl uses), with the renderer placed inside kind's
// tree so it may call kind's internal packages exactly as kind's Create
// does.
func buildKindRender(ctx context.Context, t *testing.T) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "sigs.k8s.io/kind").Output()
	require.NoError(t, err, stderrOf(err))
	kindDir, kindVersion, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	work := t.TempDir()
	require.NoError(t, copyTree(kindDir, filepath.Join(work, "kind")))
	renderSrc, err := os.ReadFile(filepath.Join("testdata", "kindrender", "render.go.txt"))
	require.NoError(t, err)
	pkg := filepath.Join(work, "kind", "pkg", "cluster", "labctlrender")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "render.go"), renderSrc, 0o644))
	mainSrc, err := os.ReadFile(filepath.Join("testdata", "kindrender", "main.go.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(work, "main.go"), mainSrc, 0o644))
	gomod := "module labctl.local/kindrender\n\ngo 1.26\n\nrequire sigs.k8s.io/kind " + kindVersion + "\n\nreplace sigs.k8s.io/kind => ./kind\n"
	require.NoError(t, os.WriteFile(filepath.Join(work, "go.mod"), []byte(gomod), 0o644))
	bin := filepath.Join(work, "kindrender")
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", bin, "."}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		res, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s: %s", strings.Join(args, " "), res)
	}
	return bin
}

// copyTree copies a module directory (read-only in the module cache) to a
// writable one.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, raw, 0o644)
	})
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	if err != nil {
		return err.Error()
	}
	return ""
}
