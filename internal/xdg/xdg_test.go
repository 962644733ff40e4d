package xdg

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/x/cache")
	d, err := CacheDir()
	require.NoError(t, err)
	assert.Equal(t, filepath.FromSlash("/x/cache/labctl"), d)
	d, err = CacheDir("controlplane", "v1")
	require.NoError(t, err)
	assert.Equal(t, filepath.FromSlash("/x/cache/labctl/controlplane/v1"), d)

	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	d, err = CacheDir()
	require.NoError(t, err)
	assert.Equal(t, filepath.FromSlash("/home/u/.cache/labctl"), d)
}
