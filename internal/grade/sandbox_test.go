package grade_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/sandbox"
)

// TestEvilSubmissionCannotCheat grades an evil submission (the reference
// plus every attack on the grader: testdata/grade/evil.patch) beside an
// honest one. Every attack fails, the evil one gets exactly its honest
// score, the honest one full marks, and the output directory holds only
// the grader's files.
func TestEvilSubmissionCannotCheat(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster per submission")
	}
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip("no sandbox on this machine: " + sup.Reason)
	}
	lab := loadLab(t, "lab-8.2")
	root := t.TempDir()
	subs := materialize(t, filepath.Join(root, "class"), []fixture{
		{Student: "honest"},
		{Student: "evil", Patches: []string{"testdata/grade/evil.patch"}},
	}, true)
	out, work := filepath.Join(root, "out"), filepath.Join(root, "work")
	require.NoError(t, os.MkdirAll(work, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(out, grade.FeedbackDir), 0o755))
	cache := userCache(t)
	home, _ := os.UserHomeDir()
	cluster := func(student string, parts ...string) string {
		return filepath.Join(append([]string{work, student, "clusters", "grade"}, parts...)...)
	}

	// What the evil manager aims at, wherever the grader keeps it.
	targets := map[string]any{
		"read": []string{
			filepath.Join(home, ".kube", "config"),
			filepath.Join(cache, "controlplane"),
			filepath.Join(cache, "managers"),
			filepath.Join(subs[0].Dir, "go.mod"),
			filepath.Join(work, "honest", "sandbox", "src", "go.mod"),
			cluster("honest", "pki", "ca.key"),
			cluster("honest", "kubeconfig"),
			cluster("evil", "pki", "ca.key"),
			cluster("evil", "pki", "admin.key"),
			cluster("evil", "kubeconfig"),
			cluster("evil", "state.json"),
			cluster("evil", "logs", "audit.log"),
			out,
		},
		"write": []string{
			out,
			filepath.Join(out, grade.FeedbackDir),
			filepath.Join(cache, "managers"),
			cluster("evil"),
			cluster("evil", "logs"),
			filepath.Join(work, "honest", "sandbox", "src"),
			work,
			home,
		},
		"kill": []int{os.Getpid()},
	}
	raw, err := json.Marshal(targets)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(subs[1].Dir, "evil-targets.json"), raw, 0o644))

	s, stdout, stderr := iostreams.Test(false)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	gb, err := grade.Run(ctx, grade.Options{
		Lab: lab, Submissions: subs, Jobs: 2, Timeout: 6 * time.Minute, OutDir: out,
		Streams: s, Binaries: binaries, WorkDir: work,
	})
	t.Logf("%s\n%s", stderr, stdout)
	require.NoError(t, err)

	honest, _ := gb.Submission("honest")
	evil, _ := gb.Submission("evil")
	require.NotNil(t, honest)
	require.NotNil(t, evil)
	assert.Equal(t, report.OutcomeGraded, honest.Outcome, honest.Message)
	assert.Equal(t, honest.MaxPoints, honest.Score, "the honest submission gets full marks")
	assert.Equal(t, honest.Score, evil.Score, "the evil submission gets exactly its honest score")

	// Every attack was tried and failed.
	log := readFile(t, out, grade.LogsDir, "evil", "manager.log")
	attempts := regexp.MustCompile(`(?m)^LABCTL-EVIL (.+): (blocked|SUCCEEDED) \((.*)\)$`).FindAllStringSubmatch(log, -1)
	var succeeded []string
	for _, a := range attempts {
		if a[2] == "SUCCEEDED" {
			succeeded = append(succeeded, a[1]+": "+a[3])
		}
	}
	t.Logf("%d attacks tried, all lines:\n%s", len(attempts), strings.Join(grep(log, "LABCTL-EVIL"), "\n"))
	assert.Empty(t, succeeded, "attacks that worked")
	wantAttempts := len(targets["read"].([]string)) + len(targets["write"].([]string)) + 2 /* pids */ + 8
	assert.GreaterOrEqual(t, len(attempts), wantAttempts, "every attack ran")
	require.Regexp(t, `LABCTL-EVIL running as uid (\d+)`, log)
	assert.NotContains(t, log, "running as uid 0 ")

	// The output directory holds the grader's files only.
	var files []string
	require.NoError(t, filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out, p)
			files = append(files, rel)
		}
		return err
	}))
	slices.Sort(files)
	assert.Equal(t, []string{
		"feedback/evil.md", "feedback/honest.md", "gradebook.csv", "junit.xml",
		"logs/evil/grade.log", "logs/evil/manager.log", "logs/honest/grade.log", "logs/honest/manager.log",
		"report.html", "results.json",
	}, files)
	for _, d := range []string{filepath.Join(cache, "managers"), home} {
		_, err := os.Stat(filepath.Join(d, "evil-was-here"))
		assert.ErrorIs(t, err, os.ErrNotExist, d)
	}
	requireNothingRunning(t, work)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"class", "out", "work"}, names, "nothing escaped next to the work directory")
}

func userCache(t *testing.T) string {
	t.Helper()
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		var err error
		base, err = os.UserCacheDir()
		require.NoError(t, err)
	}
	return filepath.Join(base, "labctl")
}

func grep(s, word string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return out
}
