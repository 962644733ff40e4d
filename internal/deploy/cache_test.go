package deploy

import (
	"os"
	"path/filepath"
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
