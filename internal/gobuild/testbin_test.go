package gobuild

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runHere is a Runner with the go on PATH.
func runHere(ctx context.Context, c Command) (string, error) {
	cmd := exec.CommandContext(ctx, "go", c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off"), c.Env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = c.Stdout, &stderr
	err := cmd.Run()
	return stderr.String(), err
}

func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module example.com/m\n\ngo 1.24\n"
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

// Packages with tests get a binary each (one without tests none), and a
// binary run through test2json reads as go test -json did: with the
// environment and the flags given, failing fast.
func TestCompileTestsBuildsOnceAndRunsLikeGoTest(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	dir := writeModule(t, map[string]string{
		"a/a.go":      "package a\n\nfunc A() int { return 1 }\n",
		"a/a_test.go": "package a\n\nimport (\"os\"; \"testing\")\n\nfunc TestFirst(t *testing.T) { if os.Getenv(\"MUTANT\") != \"\" { t.Fatal(\"caught\") } }\n\nfunc TestSecond(t *testing.T) {}\n",
		"b/b.go":      "package b\n",
		"c/c_test.go": "package c_test\n\nimport \"testing\"\n\nfunc TestC(t *testing.T) {}\n",
	})
	out := t.TempDir()
	ctx := context.Background()
	bins, failed, err := CompileTests(ctx, runHere, Command{Dir: dir, Write: []string{out}}, []string{"./..."}, nil, out)
	require.NoError(t, err)
	require.Nil(t, failed)
	require.Len(t, bins, 2)
	assert.Equal(t, "example.com/m/a", bins[0].ImportPath)
	assert.Equal(t, filepath.Join(dir, "a"), bins[0].Dir)
	assert.Equal(t, "example.com/m/c", bins[1].ImportPath)
	assert.False(t, bins[0].Ginkgo)
	assert.FileExists(t, bins[0].Path)

	var stdout bytes.Buffer
	_, err = runHere(ctx, bins[0].Command(Command{Stdout: &stdout}))
	require.NoError(t, err)
	run := ParseTestEvents(stdout.Bytes())
	assert.ElementsMatch(t, []string{"example.com/m/a TestFirst", "example.com/m/a TestSecond"}, run.Passed)

	stdout.Reset()
	_, err = runHere(ctx, bins[0].Command(Command{Stdout: &stdout, Env: []string{"MUTANT=1"}}, "-test.failfast"))
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	run = ParseTestEvents(stdout.Bytes())
	assert.Equal(t, []string{"example.com/m/a TestFirst"}, run.Failed)
	assert.Empty(t, run.Passed, "-test.failfast stops at the first failure")
	assert.Contains(t, run.Output["example.com/m/a TestFirst"], "    a_test.go:5: caught")
}

// A test that does not compile is the project's failure, named, with the
// compiler's words; no binary.
func TestCompileTestsReportsABuildFailure(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	dir := writeModule(t, map[string]string{
		"a/a.go":      "package a\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) { undefinedThing() }\n",
	})
	out := t.TempDir()
	bins, failed, err := CompileTests(context.Background(), runHere, Command{Dir: dir, Write: []string{out}}, []string{"./..."}, nil, out)
	require.NoError(t, err)
	assert.Empty(t, bins)
	require.NotNil(t, failed)
	assert.Equal(t, []string{"example.com/m/a"}, failed.BuildFailed)
	assert.Contains(t, failed.BuildOutput, "undefined: undefinedThing")
}

// A project directory given relative to the working directory (or "",
// the working directory itself) still owns the packages go list reports
// with absolute paths.
func TestWithinTakesARelativeRoot(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "project", "a"), 0o755))
	t.Chdir(root)
	pkg := filepath.Join(root, "project", "a")
	assert.True(t, within("project", pkg))
	assert.True(t, within("./project/", pkg))
	assert.True(t, within("", pkg))
	assert.False(t, within("project/a/b", pkg))
	assert.False(t, within("other", pkg))
}
