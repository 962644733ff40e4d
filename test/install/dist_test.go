package install_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"github.com/stretchr/testify/require"
)

// make dist builds what a release publishes: an executable per platform,
// stamped with the release's version, and a checksums.txt that
// `sha256sum -c` (the Classroom workflow's check) accepts. Here for this
// machine's platform only: every platform is the same script.
func TestDistBuildsAVerifiableRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles labctl with -trimpath: a minute or more")
	}
	root := repoRoot(t)
	out := t.TempDir()
	const version = "v9.8.7"
	cmd := exec.Command(filepath.Join(root, "hack", "dist.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION="+version, "TARGETS="+runtime.GOOS+"/"+runtime.GOARCH, "DIST="+out)
	raw, err := cmd.CombinedOutput()
	require.NoError(t, err, string(raw))

	name := "labctl-" + runtime.GOOS + "-" + runtime.GOARCH
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{name, "checksums.txt"}, names)

	sums, err := os.ReadFile(filepath.Join(out, "checksums.txt"))
	require.NoError(t, err)
	f, err := os.Open(filepath.Join(out, name))
	require.NoError(t, err)
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(h.Sum(nil))+"  "+name+"\n", string(sums), "sha256sum's format, one line per file")
	check := exec.Command("sha256sum", "-c", "checksums.txt")
	check.Dir = out
	raw, err = check.CombinedOutput()
	require.NoError(t, err, string(raw))

	raw, err = exec.Command(filepath.Join(out, name), "--version").CombinedOutput()
	require.NoError(t, err, string(raw))
	require.Contains(t, string(raw), version)
}

// The repository's own workflows (the release, the kind e2e) pass
// actionlint, with shellcheck on their scripts where it is installed.
func TestRepositoryWorkflowsLint(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, ".github", "workflows", "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	opts := &actionlint.LinterOptions{WorkingDir: root}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		opts.Shellcheck = sc
	} else {
		t.Log("shellcheck is not installed: actionlint checks the workflows without it")
	}
	l, err := actionlint.NewLinter(io.Discard, opts)
	require.NoError(t, err)
	for _, file := range files {
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		errs, err := l.Lint(file, raw, nil)
		require.NoError(t, err)
		for _, e := range errs {
			t.Errorf("actionlint: %s:%d:%d: %s [%s]", strings.TrimPrefix(e.Filepath, root+"/"), e.Line, e.Column, e.Message, e.Kind)
		}
	}
}

// repoRoot is the checkout this test runs in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}
