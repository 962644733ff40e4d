package deploy

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/labctl/labctl/internal/operator"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A cached manager is stored read-only with its hash; a binary changed
// afterwards is not reused.
func TestCachedManagerIsCheckedBeforeReuse(t *testing.T) {
	dir := t.TempDir()
	built := filepath.Join(dir, "built")
	require.NoError(t, os.WriteFile(built, []byte("#!/bin/sh\necho honest\n"), 0o755))
	bin := filepath.Join(dir, "manager")
	require.NoError(t, storeManager(built, bin))
	info, err := os.Stat(bin)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o555), info.Mode().Perm(), "stored read-only")
	assert.True(t, cachedIntact(bin))

	require.NoError(t, os.Chmod(bin, 0o755))
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho replaced\n"), 0o755))
	assert.False(t, cachedIntact(bin), "a replaced binary must be built again")
	require.NoError(t, os.Remove(bin+".sha256"))
	assert.False(t, cachedIntact(bin), "no recorded hash, no reuse")
}

// The cache key follows contents and the toolchain, not file times.
func TestSourceHashFollowsContentsNotTimes(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(f, []byte("package main\n"), 0o644))
	a, err := operator.Fingerprint(dir, "go1.26")
	require.NoError(t, err)
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(f, old, old))
	b, err := operator.Fingerprint(dir, "go1.26")
	require.NoError(t, err)
	assert.Equal(t, a, b, "times do not matter")
	require.NoError(t, os.WriteFile(f, []byte("package main // x\n"), 0o644))
	c, err := operator.Fingerprint(dir, "go1.26")
	require.NoError(t, err)
	assert.NotEqual(t, a, c, "contents do")
	require.NoError(t, os.Chtimes(f, old, old))
	d, err := operator.Fingerprint(dir, "go1.27")
	require.NoError(t, err)
	assert.NotEqual(t, c, d, "so does the toolchain")
}

// Two projects whose sources are the same (two students' submissions,
// graded side by side) share a cache entry: built at once, both get it.
func TestSameManagerBuiltTwiceAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var projects []*Project
	for _, name := range []string{"a", "b"} {
		dir := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "cmd"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/op\n\ngo 1.24\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cmd", "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644))
		projects = append(projects, &Project{Dir: dir, Name: "op"})
	}
	paths := make([]string, len(projects))
	errs := make([]error, len(projects))
	var wg sync.WaitGroup
	for i, p := range projects {
		wg.Go(func() { paths[i], _, errs[i] = BuildManager(t.Context(), p, BuildOptions{}) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.Equal(t, paths[0], paths[1], "one entry")
	assert.True(t, cachedIntact(paths[0]))
}
