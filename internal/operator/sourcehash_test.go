package operator

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The fingerprint recorded at deploy tells a stale operator from a
// current one: any edit of a source file after the deploy shows.
func TestOperatorSourceChanged(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(main, []byte("package main\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644))
	sum, err := SourceFingerprint(dir)
	require.NoError(t, err)

	op := &Operator{SourceHash: sum}
	changed, known, err := op.SourceChanged(dir)
	require.NoError(t, err)
	require.True(t, known)
	require.False(t, changed)

	// A test file is no part of the manager.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main_test.go"), []byte("package main\n"), 0o644))
	changed, _, _ = op.SourceChanged(dir)
	require.False(t, changed)

	later := time.Now().Add(time.Minute)
	require.NoError(t, os.WriteFile(main, []byte("package main\n\nfunc init() {}\n"), 0o644))
	require.NoError(t, os.Chtimes(main, later, later))
	changed, known, _ = op.SourceChanged(dir)
	require.True(t, known)
	require.True(t, changed)

	_, known, _ = (&Operator{}).SourceChanged(dir)
	require.False(t, known, "no fingerprint recorded (in-cluster deploy)")
}
