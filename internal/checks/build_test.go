//go:build linux

package checks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/sandbox"
)

// The build check runs the go command in a sandbox when grading: this
// test binary is then the sandbox's helper.
func TestMain(m *testing.M) {
	sandbox.MaybeRun()
	os.Exit(m.Run())
}

// writeModule writes a module of files (path: content) under dir.
func writeModule(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	files["go.mod"] = "module example.com/built\n\ngo 1.22\n"
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func buildContext(dir string, runGo GoRunner) *Context {
	return &Context{run: &run{o: Options{ProjectDir: dir, Go: runGo}}, Timeout: 5 * time.Minute}
}

const (
	compiles       = "package ok\n\nfunc Answer() int { return 42 }\n"
	doesNotCompile = "package broken\n\nfunc Answer() int { return \"forty-two\" }\n"
)

// Verify's build check compiles with the go here: a project that
// compiles passes, one that does not fails with the compiler's error.
func TestBuildCheckHere(t *testing.T) {
	good := t.TempDir()
	writeModule(t, good, map[string]string{"ok/ok.go": compiles})
	out := runBuild(context.Background(), buildContext(good, nil), nil)
	assert.Equal(t, report.Pass, out.Status, out.Message)

	bad := t.TempDir()
	writeModule(t, bad, map[string]string{"ok/ok.go": compiles, "broken/broken.go": doesNotCompile})
	out = runBuild(context.Background(), buildContext(bad, nil), nil)
	assert.Equal(t, report.Fail, out.Status, out.Message)
	assert.Contains(t, out.Message, "broken.go:3")
}

// Grading's build check compiles in the submission's box (deploy.BoxedGo),
// with the same verdicts; what the submission's assembler and cgo files
// #include is what the box shows, not the grader's files; and the
// compiler runs as the box's user, its cache entries written to the box.
func TestBuildCheckInBox(t *testing.T) {
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip("no sandbox on this machine: " + sup.Reason)
	}
	root := t.TempDir()
	// A grader's file, readable by anyone who can see it (a neighbour's
	// copy, a cluster's key): the grader hides root from boxes.
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	secret := "LabctlGraderSecret" + hex.EncodeToString(nonce)
	secretFile := filepath.Join(root, "grader", "secret.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(secretFile), 0o755))
	require.NoError(t, os.WriteFile(secretFile, []byte(secret+" is not for students\n"), 0o644))

	build := func(name string, files map[string]string) (Outcome, *sandbox.Box) {
		t.Helper()
		src := filepath.Join(root, name)
		writeModule(t, src, files)
		box, err := sandbox.NewBox(filepath.Join(root, "work", name), sandbox.UIDFor(root+name), []string{root})
		require.NoError(t, err)
		require.NoError(t, sandbox.CopyTree(context.Background(), src, box.Src(), sandbox.CopyLimits{}))
		runGo := deploy.BoxedGo{Box: box, Nice: 10}.Run
		return runBuild(context.Background(), buildContext(box.Src(), runGo), nil), box
	}

	marker := "LabctlBoxMark" + hex.EncodeToString(nonce)
	out, box := build("good", map[string]string{"ok/ok.go": compiles, "mark/mark.go": "package mark\n\nfunc " + marker + "() {}\n"})
	assert.Equal(t, report.Pass, out.Status, out.Message)
	// Its packages were compiled by the box's user into the box's layer
	// of the cache (with overlayfs; without, into the box's home).
	written, foreign, marked := 0, 0, false
	require.NoError(t, filepath.WalkDir(box.Root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case p == box.Src():
			return filepath.SkipDir // the copy: the grader's
		case d.IsDir():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		written++
		if int(info.Sys().(*syscall.Stat_t).Uid) != box.UID {
			foreign++
		}
		if raw, err := os.ReadFile(p); err == nil && bytes.Contains(raw, []byte(marker)) {
			marked = true
		}
		return nil
	}))
	assert.Positive(t, written, "the compile wrote its cache entries into the box")
	assert.Zero(t, foreign, "every file the compile wrote is the box user's")
	assert.True(t, marked, "the package only the check compiles was compiled in the box")

	out, _ = build("broken", map[string]string{"ok/ok.go": compiles, "broken/broken.go": doesNotCompile})
	assert.Equal(t, report.Fail, out.Status, out.Message)
	assert.Contains(t, out.Message, "broken.go:3")

	// An unimported package whose assembler (and, with cgo, C) file
	// includes the grader's file: the include finds nothing in the box,
	// so the check fails and quotes none of it.
	leak := map[string]string{
		"ok/ok.go":       compiles,
		"leak/leak.go":   "package leak\n",
		"leak/x.s":       "#include \"" + secretFile + "\"\n",
		"leakc/leakc.go": "package leakc\n\n/*\n#include \"" + secretFile + "\"\n*/\nimport \"C\"\n",
	}
	out, _ = build("leak", leak)
	assert.Equal(t, report.Fail, out.Status, out.Message)
	assert.NotContains(t, out.Message+out.Observed, secret)
	assert.Contains(t, out.Observed, "no such file or directory")
	t.Logf("in the box: %s", out.Observed)

	// The same project built here, as the grader, does quote it: the
	// attack is real.
	here := runBuild(context.Background(), buildContext(filepath.Join(root, "leak"), nil), nil)
	assert.Contains(t, here.Message+here.Observed, secret)
	t.Logf("here: %s", here.Observed)
}

// The mutants' test binaries are built and run in the box: go test -c
// writes only the directory it was given (the box's user owns what it
// wrote), and the binary, run through test2json, sees the mutant.
func TestTestBinariesInBox(t *testing.T) {
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip("no sandbox on this machine: " + sup.Reason)
	}
	root := t.TempDir()
	src := filepath.Join(root, "sub")
	writeModule(t, src, map[string]string{
		"a/a.go":      compiles,
		"a/a_test.go": "package ok\n\nimport (\"os\"; \"testing\")\n\nfunc TestMutant(t *testing.T) { if os.Getenv(\"LABCTL_MUTANT\") != \"\" { t.Fatal(\"caught\") } }\n",
	})
	box, err := sandbox.NewBox(filepath.Join(root, "work"), sandbox.UIDFor(root), []string{root})
	require.NoError(t, err)
	require.NoError(t, sandbox.CopyTree(context.Background(), src, box.Src(), sandbox.CopyLimits{}))
	runGo := deploy.BoxedGo{Box: box, Nice: 10}.Run
	out := filepath.Join(root, "bin") // outside the box: shown to it only as Write
	require.NoError(t, os.Mkdir(out, 0o700))
	ctx := context.Background()
	bins, failed, err := gobuild.CompileTests(ctx, runGo, gobuild.Command{Dir: box.Src(), Write: []string{out}}, []string{"./..."}, nil, out)
	require.NoError(t, err)
	require.Nil(t, failed)
	require.Len(t, bins, 1)
	info, err := os.Stat(bins[0].Path)
	require.NoError(t, err)
	assert.Equal(t, box.UID, int(info.Sys().(*syscall.Stat_t).Uid), "the box's user built it")

	var stdout bytes.Buffer
	_, err = runGo(ctx, bins[0].Command(gobuild.Command{Env: []string{"LABCTL_MUTANT=x"}, Read: []string{out}, Stdout: &stdout}))
	require.Error(t, err)
	run := gobuild.ParseTestEvents(stdout.Bytes())
	assert.Equal(t, []string{"example.com/built/a TestMutant"}, run.Failed)
}

// A dependency whose export file the go command named as "" is its build
// cache's fault, not the project's: the check compiles once more, and a
// second such failure is a check that could not run (skipped: it costs
// nothing). A real compile error still fails.
func TestBuildCheckRetriesAnEmptyExportFile(t *testing.T) {
	exitErr := exec.Command("false").Run()
	require.Error(t, exitErr)
	const cacheGlitch = "# example.com/x/internal/controller\ninternal/controller/backup_controller.go:44:2: could not import sigs.k8s.io/controller-runtime/pkg/handler (open : no such file or directory)\n"
	dir := t.TempDir()
	writeModule(t, dir, map[string]string{"ok/ok.go": compiles})
	for _, c := range []struct {
		name    string
		replies []string // stderr per run; "" passes
		want    report.Result
		runs    int
	}{
		{"once: passes on the second run", []string{cacheGlitch, ""}, report.Pass, 2},
		{"twice: not the project's, and costs nothing", []string{cacheGlitch, cacheGlitch}, report.Skipped, 2},
		{"a compile error after it fails", []string{cacheGlitch, "broken/broken.go:3:31: cannot use \"forty-two\"\n"}, report.Fail, 2},
		{"a compile error is not retried", []string{"broken/broken.go:3:31: cannot use \"forty-two\"\n"}, report.Fail, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := 0
			runGo := func(context.Context, gobuild.Command) (string, error) {
				reply := c.replies[runs]
				runs++
				if reply == "" {
					return "", nil
				}
				return reply, exitErr
			}
			out := runBuild(context.Background(), buildContext(dir, runGo), nil)
			assert.Equal(t, c.want, out.Status, out.Message)
			assert.Equal(t, c.runs, runs)
		})
	}
}
