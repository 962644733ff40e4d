//go:build linux

package faults

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/sandbox"
)

// graderKilled kills `labctl grade` while a submission's cluster runs: its
// work directory (keys, kubeconfigs, the submission's copy) is left under
// the state directory, never in $TMPDIR, and the next grade stops what
// is left and removes it, saying so.
func graderKilled(t *testing.T) {
	e := ownEnv(t)
	// Lab 1.4 grades a CRD file: nothing to build, a cluster all the same.
	crd, err := os.ReadFile(filepath.Join(moduleRoot(), "internal", "reference", "website", "website-crd.yaml"))
	require.NoError(t, err)
	submission := filepath.Join(e.root, "class", "alice")
	writeFile(t, filepath.Join(submission, "website-crd.yaml"), string(crd), 0o644)
	args := []string{"grade", "lab-1.4", submission, "--out", filepath.Join(e.root, "grades"), "--jobs", "1"}
	if !sandbox.Probe().OK {
		args = append(args, "--unsafe-no-sandbox")
	}
	gradeRoot := filepath.Join(e.state, "labctl", "grade")
	require.NoError(t, os.MkdirAll(gradeRoot, 0o700))

	r := e.start(t, args...)
	// The grader takes its cleaning lock, then makes its work directory.
	run := filepath.Join(gradeRoot, waitForNewFile(t, gradeRoot, map[string]bool{".clean.lock": true}, r.done))
	// Kill it once the submission's control plane is all started, so
	// there is something to stop and much to remove.
	waitForPath(t, run, []string{"alice", "clusters", "grade", "logs", "kwok.log"}, r.done)
	signal(t, r, syscall.SIGKILL)
	killed := r.wait(t, time.Minute)
	require.Equal(t, -1, killed.code, "killed\n%s", killed)
	assert.DirExists(t, filepath.Join(run, "alice", "clusters", "grade", "pki"), "a killed grader leaves its work directory (for the next one)")
	assert.Equal(t, os.FileMode(0o700), mode(t, run), "its keys are the grader's alone")
	t.Logf("left running after the kill: %v", procsUnder(e.root))
	assert.Empty(t, tempEntries(e), "nothing of the grader in $TMPDIR")

	again := e.run(t, args...)
	assert.Equal(t, 0, again.code, "%s", again)
	checkStderr(t, again, "", false)
	assert.Regexp(t, `(?m)^note: cleaned up 1 grading run\(s\) left by a grader that is gone \(pid \d+\): stopped their clusters and managers.*, removed \d+ (MB|kB) from `+gradeRoot+`$`, again.stderr)
	assert.NoDirExists(t, run)
	entries, _ := os.ReadDir(gradeRoot)
	for _, ent := range entries {
		assert.False(t, strings.HasPrefix(ent.Name(), "run-"), "work directory %s is left", ent.Name())
	}
	assert.Empty(t, e.leftovers(), "no process, port or temporary file is left")
}

// waitForPath waits for base/parts..., one level at a time (each wait
// watches a directory that exists).
func waitForPath(t *testing.T, base string, parts []string, done <-chan struct{}) {
	t.Helper()
	p := base
	for _, part := range parts {
		p = filepath.Join(p, part)
		waitForFile(t, p, 3*time.Minute, done)
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	return info.Mode().Perm()
}

func tempEntries(e *env) []string {
	var out []string
	entries, _ := os.ReadDir(e.tmp)
	for _, ent := range entries {
		out = append(out, ent.Name())
	}
	return out
}
