package filecopy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIntoCopiesWithTheModeAndHonoursExclusive(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.WriteFile(src, []byte("bytes"), 0o600))

	dst := filepath.Join(dir, "dst")
	require.NoError(t, Into(dst, os.O_EXCL, 0o750, src))
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	assert.Equal(t, "bytes", string(got))
	info, err := os.Stat(dst)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm()&0o700, "the owner may run it, whatever the umask")

	assert.ErrorIs(t, Into(dst, os.O_EXCL, 0o644, src), os.ErrExist, "an existing file is refused")

	planted := filepath.Join(dir, "planted")
	require.NoError(t, os.Symlink(filepath.Join(dir, "elsewhere"), planted))
	assert.ErrorIs(t, Into(planted, os.O_EXCL, 0o644, src), os.ErrExist, "a planted symlink is not followed")
	assert.NoFileExists(t, filepath.Join(dir, "elsewhere"))

	require.NoError(t, os.WriteFile(dst, []byte("a much longer old content"), 0o644))
	require.NoError(t, Into(dst, os.O_TRUNC, 0o644, src))
	got, _ = os.ReadFile(dst)
	assert.Equal(t, "bytes", string(got), "O_TRUNC replaces what was there")

	assert.ErrorIs(t, Into(filepath.Join(dir, "x"), 0, 0o644, filepath.Join(dir, "missing")), os.ErrNotExist)
}
