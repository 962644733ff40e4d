package deploy

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPruneManagersKeepsTheNewest(t *testing.T) {
	root := t.TempDir()
	base := time.Now().Add(-time.Hour)
	for i := 0; i < 5; i++ {
		dir := filepath.Join(root, string(rune('a'+i)))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		at := base.Add(time.Duration(i) * time.Minute)
		require.NoError(t, os.Chtimes(dir, at, at))
	}
	pruneManagers(root, 2)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"d", "e"}, names)
}
