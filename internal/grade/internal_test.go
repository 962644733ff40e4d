package grade

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cgroup"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
	labsfs "github.com/labctl/labctl/labs"
)

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=s", "GIT_AUTHOR_EMAIL=s@x", "GIT_COMMITTER_NAME=s", "GIT_COMMITTER_EMAIL=s@x")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out))
}

func TestCloneRefs(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	gitRun(t, repo, "init", "--quiet", "--initial-branch=main")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "f"), []byte("one"), 0o644))
	gitRun(t, repo, "add", "f")
	gitRun(t, repo, "commit", "--quiet", "-m", "one")
	first := gitRun(t, repo, "rev-parse", "HEAD")
	gitRun(t, repo, "tag", "v1")
	gitRun(t, repo, "checkout", "--quiet", "-b", "lab-8.2")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "f"), []byte("two"), 0o644))
	gitRun(t, repo, "commit", "--quiet", "-am", "two")
	second := gitRun(t, repo, "rev-parse", "HEAD")
	gitRun(t, repo, "checkout", "--quiet", "main")

	ctx := context.Background()
	for ref, want := range map[string]string{"": first, "v1": first, "lab-8.2": second, first[:10]: first} {
		dst := filepath.Join(t.TempDir(), "src")
		got, err := clone(ctx, "", Submission{Student: "s", Repo: repo, Ref: ref}, dst)
		require.NoError(t, err, "ref %q", ref)
		require.Equal(t, want, got, "ref %q", ref)
	}
	_, err := clone(ctx, "", Submission{Student: "s", Repo: repo, Ref: "nope"}, filepath.Join(t.TempDir(), "src"))
	require.ErrorContains(t, err, "no branch, tag or commit nope")
	_, err = clone(ctx, "", Submission{Student: "s", Repo: filepath.Join(repo, "missing")}, filepath.Join(t.TempDir(), "src"))
	require.Error(t, err)
}

func TestOutputsReplaceOneRow(t *testing.T) {
	lab := &labs.Lab{ID: "lab-t", Title: labs.Text{EN: "T"}, Tasks: []labs.Task{{ID: "1", Points: 3}, {ID: "2", Points: 2, Hidden: true}}}
	dir := t.TempDir()
	sub := func(student string, score float64, at time.Time) *report.GradedSubmission {
		return &report.GradedSubmission{Student: student, Graded: at, Outcome: report.OutcomeGraded, Score: score, MaxPoints: 5,
			Tasks: []report.TaskScore{{ID: "1", Points: 3, Score: score, Status: report.Pass}, {ID: "2", Points: 2, Status: report.Fail}}}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out, err := openOutputs(dir, lab, "en", CreditChecks, false)
	require.NoError(t, err)
	require.NoError(t, out.record(sub("bob", 1, t0)))
	require.NoError(t, out.record(sub("alice", 3, t0)))
	csv, _ := os.ReadFile(filepath.Join(dir, GradebookFile))
	require.Equal(t, "student,total,max,1,2\nalice,3,5,3,0\nbob,1,5,1,0\n", string(csv))

	// A later run, for bob only, keeps alice's row.
	out, err = openOutputs(dir, lab, "en", CreditChecks, false)
	require.NoError(t, err)
	require.NoError(t, out.record(sub("bob", 2.5, t0.Add(time.Hour))))
	csv, _ = os.ReadFile(filepath.Join(dir, GradebookFile))
	require.Equal(t, "student,total,max,1,2\nalice,3,5,3,0\nbob,2.5,5,2.5,0\n", string(csv))
	require.FileExists(t, filepath.Join(dir, FeedbackDir, "alice.md"))
	require.FileExists(t, filepath.Join(dir, JUnitFile))
	// report.html is rendered from the same gradebook, both rows in it.
	page, err := os.ReadFile(filepath.Join(dir, ReportFile))
	require.NoError(t, err)
	require.Contains(t, string(page), `<a href="#s-1">alice</a>`)
	require.Contains(t, string(page), `<td class="num total lvl-part" data-sort="2.5">`, "bob's new total")
	tmp, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	require.Empty(t, tmp, "files are written atomically")

	// The directory belongs to that lab.
	other := &labs.Lab{ID: "lab-u", Tasks: lab.Tasks}
	_, err = openOutputs(dir, other, "en", CreditChecks, false)
	require.ErrorContains(t, err, "holds the grades of lab-t")
	changed := &labs.Lab{ID: "lab-t", Tasks: []labs.Task{{ID: "1", Points: 4}, {ID: "2", Points: 2}}}
	_, err = openOutputs(dir, changed, "en", CreditChecks, false)
	require.ErrorContains(t, err, "changed")
	_, err = openOutputs(dir, lab, "en", CreditTasks, false)
	require.ErrorContains(t, err, "--credit checks")

	// Every student of a gradebook is graded under one policy.
	out, err = openOutputs(dir, lab, "en", CreditChecks, false)
	require.NoError(t, err)
	require.ErrorContains(t, out.usePolicy("strict"), `under policy "the lab's defaults", not "strict"`)
	require.NoError(t, out.usePolicy(""))
}

func TestFirstError(t *testing.T) {
	log := "2026-01-01T00:00:00Z\tINFO\tsetup\tstarting\n" +
		"==== labctl supervisor 2026: limits for the manager: CPU time 90s\n" +
		"2026-01-01T00:00:01Z\tERROR\tsetup\tFailed to create controller\t{\"controller\": \"Database\", \"error\": \"no kind is registered\"}\n"
	require.Equal(t, `ERROR setup Failed to create controller {"controller": "Database", "error": "no kind is registered"}`, firstError(log))
	require.Equal(t, "panic: boom", firstError("x\npanic: boom\n"))
	require.Empty(t, firstError("all fine\n"))
}

func TestProgressTerminalAndPiped(t *testing.T) {
	subs := []Submission{{Student: "alice"}, {Student: "bob"}}

	s, _, errOut := iostreamsTest(true)
	p := newProgress(s, subs)
	p.set("alice", "verifying", "3/30 checks")
	p.finish("bob", "0/100 build-failed", true)
	p.stop()
	out := errOut.String()
	require.Contains(t, out, "STUDENT")
	require.Contains(t, out, "3/30 checks")
	require.Contains(t, out, "0/100 build-failed")
	require.Contains(t, out, "\x1b[J", "redrawn in place")

	s, _, errOut = iostreamsTest(false)
	p = newProgress(s, subs)
	p.set("alice", "cluster", "")
	p.set("alice", "cluster", "detail changes print nothing")
	p.set("alice", "verifying", "1/30 checks")
	p.finish("alice", "42/100", true)
	p.stop()
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	require.Len(t, lines, 3)
	require.Equal(t, "alice: cluster", lines[0])
	require.Equal(t, "alice: verifying", lines[1])
	require.True(t, strings.HasPrefix(lines[2], "alice: 42/100 ("), lines[2])
	require.NotContains(t, errOut.String(), "\x1b")
}

var iostreamsTest = iostreams.Test

// TestBoxRendersLocalFilesOnly renders a project whose kustomization
// names another repository on the machine (file://...?ref=) as the
// grader in a box does: kustomize's git clone is refused.
func TestBoxRendersLocalFilesOnly(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	other := t.TempDir()
	gitRun(t, other, "init", "--quiet", "--initial-branch=main")
	require.NoError(t, os.WriteFile(filepath.Join(other, "kustomization.yaml"), []byte("resources:\n- cm.yaml\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(other, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: secret-of-another-student\n"), 0o644))
	gitRun(t, other, "add", "-A")
	gitRun(t, other, "commit", "--quiet", "-m", "x")

	project := t.TempDir()
	dflt := filepath.Join(project, "config", "default")
	require.NoError(t, os.MkdirAll(dflt, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dflt, "kustomization.yaml"), []byte("resources:\n- file://"+other+"?ref=main\n"), 0o644))
	p := &deploy.Project{Dir: project}

	objs, err := p.Render()
	require.NoError(t, err, "the unconfined render clones it (the attack works without the box)")
	require.Len(t, objs, 1)

	for _, k := range []string{"GIT_ALLOW_PROTOCOL", "GIT_TERMINAL_PROMPT", "GIT_CONFIG_NOSYSTEM"} {
		t.Setenv(k, os.Getenv(k)) // restored after the test
	}
	denyGitFetches()
	_, err = p.Render()
	require.Error(t, err, "the box's grader must not clone it")
}

// TestLabsCrossIntoABox: a box gets its lab as JSON; every lab arrives
// as it left.
func TestLabsCrossIntoABox(t *testing.T) {
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	for _, lab := range all {
		raw, err := json.Marshal(boxJob{Lab: lab})
		require.NoError(t, err, lab.ID)
		var got boxJob
		require.NoError(t, json.Unmarshal(raw, &got), lab.ID)
		require.Equal(t, lab, got.Lab, lab.ID)
	}
}

// BenchmarkBoxNamespaces is what a box adds to sandbox.BenchmarkSandboxSetup:
// a process started in new network, IPC and UTS namespaces that brings
// its loopback up.
func BenchmarkBoxNamespaces(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		b.Skip("no ip command")
	}
	for b.Loop() {
		cmd := exec.Command("ip", "link", "set", "lo", "up")
		cmd.SysProcAttr = boxProcAttr()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// The run's line about boxes says what limits them, or why nothing does.
func TestDescribeBoxLimits(t *testing.T) {
	lim := DefaultBoxLimits()
	require.LessOrEqual(t, lim.Memory, int64(DefaultBoxMemory))
	require.Equal(t, "each box: 4096 processes, memory 2GiB, CPU weight 50, through cgroup v1 (pids, memory, cpu)",
		describeBoxLimits(&cgroup.Limits{Pids: 4096, Memory: 2 << 30, CPUWeight: 50}, cgroup.Support{Version: 1, Controllers: []string{"pids", "memory", "cpu"}}))
	require.Equal(t, "each box: per-process limits only (the cgroup v1 trees are not writable)",
		describeBoxLimits(&lim, cgroup.Support{Reason: "the cgroup v1 trees are not writable"}))
}
