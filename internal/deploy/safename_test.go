package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"postgres-operator":      "postgres-operator",
		"../../..":               "operator",
		"../etc/passwd":          "etc-passwd",
		"a/b":                    "a-b",
		"Bad\x00\n\tName":        "bad-name",
		"":                       "operator",
		"--x--":                  "x",
		"..":                     "operator",
		strings.Repeat("ab", 40): strings.Repeat("ab", 31) + "a",
	} {
		got := SafeName(in)
		assert.Equal(t, want, got, "SafeName(%q)", in)
		assert.Equal(t, got, filepath.Base(got), "a single path element")
	}
}

// PROJECT's projectName cannot lead the operator's directory out of the
// state directory.
func TestLoadProjectSanitisesTheProjectName(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "config", "default"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config", "default", "kustomization.yaml"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "PROJECT"), []byte("projectName: ../../..\n"), 0o644))
	p, err := LoadProject(dir)
	require.NoError(t, err)
	assert.Equal(t, "operator", p.Name)
	state := "/state/operators"
	assert.True(t, strings.HasPrefix(filepath.Join(state, p.Name), state+"/"))
}
