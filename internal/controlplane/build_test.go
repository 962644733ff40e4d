package controlplane

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/userr"
)

const fakeKubernetesGoMod = `module k8s.io/kubernetes

go 1.25

require k8s.io/api v0.0.0

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	github.com/some/fork => github.com/other/fork v1.0.0
)
`

func TestGenerateGoModPinsEveryStagingModule(t *testing.T) {
	out, err := GenerateGoMod([]byte(fakeKubernetesGoMod), DefaultVersions())
	require.NoError(t, err)
	s := string(out)
	assert.Contains(t, s, "k8s.io/kubernetes v1.37.2")
	assert.Contains(t, s, "go.etcd.io/etcd/server/v3 v3.7.3")
	assert.Contains(t, s, "sigs.k8s.io/kwok v0.8.0")
	assert.Contains(t, s, "k8s.io/api => k8s.io/api v0.37.2")
	assert.Contains(t, s, "k8s.io/client-go => k8s.io/client-go v0.37.2")
	assert.NotContains(t, s, "github.com/some/fork", "only staging replaces are carried over")
}

func TestGenerateGoModRejectsAVersionWithoutStaging(t *testing.T) {
	_, err := GenerateGoMod([]byte("module k8s.io/kubernetes\n\ngo 1.25\n"), DefaultVersions())
	require.Error(t, err)
}

func TestLdflagsStampTheVersion(t *testing.T) {
	l := Ldflags(Versions{Kubernetes: "v1.37.2"})
	assert.Contains(t, l, "gitMajor=1")
	assert.Contains(t, l, "gitMinor=37")
	assert.Contains(t, l, "gitVersion=v1.37.2")
}

func fakeBinDir(t *testing.T, components ...string) string {
	dir := t.TempDir()
	for _, c := range components {
		require.NoError(t, os.WriteFile(filepath.Join(dir, c), []byte("#!/bin/sh\n"), 0o755))
	}
	return dir
}

func TestBinDirMustBeComplete(t *testing.T) {
	dir := fakeBinDir(t, "etcd", "kube-apiserver")
	_, err := Ensure(context.Background(), Options{BinDir: dir})
	require.Error(t, err)
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	assert.Contains(t, userr.Message(err), "lacks kube-controller-manager, kube-scheduler, kwok")

	full := fakeBinDir(t, Components...)
	b, err := Ensure(context.Background(), Options{BinDir: full})
	require.NoError(t, err)
	assert.Equal(t, "--bin-dir", b.Source)
}

func TestKubebuilderAssetsAreUsedOnlyWhenComplete(t *testing.T) {
	full := fakeBinDir(t, Components...)
	t.Setenv("KUBEBUILDER_ASSETS", full)
	b, err := Ensure(context.Background(), Options{CacheDir: t.TempDir(), Go: "/nonexistent/go", FromSource: true})
	require.NoError(t, err)
	assert.Equal(t, "KUBEBUILDER_ASSETS", b.Source)

	// envtest's usual assets (etcd + apiserver only) are not enough: build.
	t.Setenv("KUBEBUILDER_ASSETS", fakeBinDir(t, "etcd", "kube-apiserver"))
	_, err = Ensure(context.Background(), Options{CacheDir: t.TempDir(), Go: "/nonexistent/go", FromSource: true})
	require.Error(t, err)
}

func TestCachedBinariesAreReused(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(cache, DefaultVersions().Key(), "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, c := range Components {
		require.NoError(t, os.WriteFile(filepath.Join(bin, c), []byte("#!/bin/sh\n"), 0o755))
	}
	b, err := Ensure(context.Background(), Options{CacheDir: cache, Go: "/nonexistent/go"})
	require.NoError(t, err)
	assert.Equal(t, "cache", b.Source)
	assert.Equal(t, bin, b.Dir)
}

func TestMissingGoToolchain(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	_, err := Ensure(context.Background(), Options{CacheDir: t.TempDir(), Go: "/nonexistent/go", FromSource: true})
	require.Error(t, err)
	assert.Equal(t, userr.ExitEnvironment, userr.Code(err))
	msg := userr.Message(err)
	assert.Contains(t, msg, "Go toolchain")
	assert.Contains(t, msg, "--bin-dir")
}

// fakeGo writes a shell script standing in for the go command.
func fakeGo(t *testing.T, script string) string {
	path := filepath.Join(t.TempDir(), "go")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755))
	return path
}

func TestProxyRefusalIsReported(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	goCmd := fakeGo(t, `echo 'go: k8s.io/kubernetes@v1.37.2: reading https://proxy.example/k8s.io/kubernetes/@v/v1.37.2.info: 403 Forbidden' >&2; exit 1`)
	_, err := Ensure(context.Background(), Options{CacheDir: t.TempDir(), Go: goCmd, FromSource: true})
	require.Error(t, err)
	assert.Equal(t, userr.ExitEnvironment, userr.Code(err))
	msg := userr.Message(err)
	assert.Contains(t, msg, "Go module proxy did not provide")
	assert.Contains(t, msg, "403 Forbidden")
}

func TestDiskFullWhileBuilding(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	gomod := filepath.Join(t.TempDir(), "k8s.mod")
	require.NoError(t, os.WriteFile(gomod, []byte(fakeKubernetesGoMod), 0o644))
	// download answers, tidy and list succeed, build runs out of space
	goCmd := fakeGo(t, `case "$1" in
  mod) if [ "$2" = download ]; then echo '{"GoMod": "`+gomod+`"}'; fi; exit 0 ;;
  list) echo a; echo b; exit 0 ;;
  build) echo 'compile: writing output: write $WORK/b001/_pkg_.a: no space left on device' >&2; exit 1 ;;
esac`)
	_, err := Ensure(context.Background(), Options{CacheDir: t.TempDir(), Go: goCmd, FromSource: true})
	require.Error(t, err)
	assert.Equal(t, userr.ExitEnvironment, userr.Code(err))
	msg := userr.Message(err)
	assert.Contains(t, msg, "the disk is full")
	assert.Contains(t, msg, "free some space")
	assert.False(t, strings.Contains(msg, "\n"))
}

func TestBuildFailureShowsTheLastLines(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	gomod := filepath.Join(t.TempDir(), "k8s.mod")
	require.NoError(t, os.WriteFile(gomod, []byte(fakeKubernetesGoMod), 0o644))
	goCmd := fakeGo(t, `case "$1" in
  mod) if [ "$2" = download ]; then echo '{"GoMod": "`+gomod+`"}'; fi; exit 0 ;;
  list) exit 0 ;;
  build) echo 'k8s.io/foo' >&2; echo './x.go:1:1: undefined: Bar' >&2; exit 1 ;;
esac`)
	cache := t.TempDir()
	_, err := Ensure(context.Background(), Options{CacheDir: cache, Go: goCmd, FromSource: true})
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), "undefined: Bar")
	assert.NotEmpty(t, Missing(filepath.Join(cache, DefaultVersions().Key(), "bin")), "nothing half-built is installed")
}
