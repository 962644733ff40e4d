package grade_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/supervise"
	"github.com/labctl/labctl/internal/testcluster"
	labsfs "github.com/labctl/labctl/labs"
)

var update = flag.Bool("update", false, "rewrite testdata/grade/expected-gradebook.csv from this run")

func TestMain(m *testing.M) {
	supervise.MaybeRun() // RunLocal re-executes this binary as the managers' supervisor
	maybeAttackBox()     // a box of the attack tests (sandbox_test.go)
	maybeDieAsABox()     // a box of TestGraderFailureIsRetriedOnce
	grade.MaybeRun()     // and Run as each submission's box
	ctrllog.SetLogger(logr.Discard())
	flag.Parse()
	os.Exit(m.Run())
}

func loadLab(t testing.TB, id string) *labs.Lab {
	t.Helper()
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	lab, ok := labs.Find(all, id)
	require.True(t, ok, "lab %s", id)
	return lab
}

func binaries(ctx context.Context, _ *iostreams.IOStreams) (*controlplane.Binaries, error) {
	return testcluster.Binaries(ctx)
}

// TestGradeClass grades the fixture class in one run (each submission on
// its own cluster, two at a time) and compares the gradebook with the
// expected table; then grades one student again and checks that only that
// row changed, and that nothing of any submission is left running.
func TestGradeClass(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster per submission")
	}
	lab := loadLab(t, "lab-8.2")
	root := t.TempDir()
	subs := materialize(t, filepath.Join(root, "class"), readClass(t, "class.csv"), true)
	out, work := filepath.Join(root, "out"), filepath.Join(root, "work")
	require.NoError(t, os.MkdirAll(work, 0o755))

	s, stdout, stderr := iostreams.Test(false)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	opts := grade.Options{
		Lab: lab, Submissions: subs, Jobs: 2, Timeout: 4 * time.Minute, OutDir: out,
		Streams: s, Binaries: binaries, WorkDir: work, Version: "v-test",
	}
	start := time.Now()
	gb, err := grade.Run(ctx, opts)
	t.Logf("graded %d submissions in %s\n%s\n%s", len(subs), time.Since(start).Round(time.Second), stderr, stdout)
	require.NoError(t, err)
	t.Log(phaseTable(gb, time.Since(start)))
	requireNothingRunning(t, work)

	// The gradebook is the expected table. The fakers' rows are left out:
	// what they score depends on how verify sees through them; the rule
	// below is what matters (no points for what they fake).
	raw, err := os.ReadFile(filepath.Join(out, grade.GradebookFile))
	require.NoError(t, err)
	book := string(raw)
	got := withoutRows(book, "fake-ready", "fake-backup")
	golden := filepath.Join(repoRoot, "testdata", "grade", "expected-gradebook.csv")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), got, "gradebook.csv differs from testdata/grade/expected-gradebook.csv")

	// Outcomes and what the feedback says about them.
	byStudent := map[string]*report.GradedSubmission{}
	for _, sub := range gb.Submissions {
		byStudent[sub.Student] = sub
	}
	require.Equal(t, report.OutcomeGraded, byStudent["reference"].Outcome)
	require.Regexp(t, `^[0-9a-f]{40}$`, byStudent["reference"].Commit, "a git submission records its commit")
	// What ran is what labctl built, and the feedback says so.
	require.Regexp(t, `^built by labctl from the main package of the submission's cmd/main\.go \(sources [0-9a-f]{12}\)$`, byStudent["reference"].Built)
	require.Contains(t, readFile(t, out, grade.FeedbackDir, "reference.md"), byStudent["reference"].Built)
	require.Equal(t, report.OutcomeBuildFailed, byStudent["broken-build"].Outcome)
	require.Contains(t, strings.Join(byStudent["broken-build"].BuildErrors, "\n"), "backup_controller.go")
	feedback := readFile(t, out, grade.FeedbackDir, "broken-build.md")
	require.Contains(t, feedback, "does not build")
	require.Contains(t, feedback, "cannot use time.Now()")
	require.Contains(t, byStudent["exits-at-start"].Message, "did not become ready")

	// A status faker does not get the points of what it fakes: a Database
	// reported Ready without children (task 4.2 is where the lab runs it
	// for real).
	for _, faker := range []string{"fake-ready"} {
		ts, _ := byStudent[faker].Task("4.2")
		assert.Zero(t, ts.Score, "%s must not get the points of task 4.2 (verify's checks must see through faked status)", faker)
		assert.Less(t, byStudent[faker].Score, byStudent["reference"].Score, faker)
		assert.Contains(t, readFile(t, out, grade.FeedbackDir, faker+".md"), "## What did not pass", faker)
	}
	// A Backup completed without a backup Job, once its Database is Ready,
	// is the course's own simulated backup: correct in lab 8.2.
	ts, _ := byStudent["fake-backup"].Task("4.2")
	assert.Equal(t, 10.0, ts.Score, "a simulated backup is correct in lab 8.2")
	require.FileExists(t, filepath.Join(out, grade.LogsDir, "reference", "manager.log"))

	// results.json and junit.xml are complete and parse.
	raw, err = os.ReadFile(filepath.Join(out, grade.ResultsFile))
	require.NoError(t, err)
	again, err := report.ReadGradebookJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Len(t, again.Submissions, len(subs))
	require.NotNil(t, again.Run, "results.json records the run")
	require.Equal(t, "v-test", again.Run.Version)
	require.Equal(t, 4*time.Minute, time.Duration(again.Run.Timeout))
	var junit struct {
		Suites []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal([]byte(readFile(t, out, grade.JUnitFile)), &junit))
	require.Len(t, junit.Suites, len(subs))
	require.Len(t, junit.Suites[0].Cases, len(lab.Tasks))
	page := readFile(t, out, grade.ReportFile)
	require.Equal(t, len(subs), strings.Count(page, `<td class="student">`), "report.html has a row per student")
	require.Contains(t, page, "broken-build")

	// Grading one student again replaces that row only.
	before := map[string]time.Time{}
	for _, sub := range gb.Submissions {
		before[sub.Student] = sub.Graded
	}
	opts.Submissions = []grade.Submission{subsByStudent(subs, "broken-build")}
	gb2, err := grade.Run(ctx, opts)
	require.NoError(t, err)
	require.Len(t, gb2.Submissions, len(subs))
	for _, sub := range gb2.Submissions {
		if sub.Student == "broken-build" {
			require.True(t, sub.Graded.After(before[sub.Student]), "the re-graded row is new")
		} else {
			require.Equal(t, before[sub.Student], sub.Graded, "row %s is untouched", sub.Student)
		}
	}
	raw2, err := os.ReadFile(filepath.Join(out, grade.GradebookFile))
	require.NoError(t, err)
	require.Equal(t, book, string(raw2), "grading broken-build again changes nothing in the gradebook")
	requireNothingRunning(t, work)
}

// withoutRows drops the rows of some students from a gradebook CSV.
func withoutRows(csv string, students ...string) string {
	var keep []string
	for _, l := range strings.SplitAfter(csv, "\n") {
		student, _, _ := strings.Cut(l, ",")
		if !slices.Contains(students, student) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

func subsByStudent(subs []grade.Submission, id string) grade.Submission {
	for _, s := range subs {
		if s.Student == id {
			return s
		}
	}
	panic("no fixture " + id)
}

func phases(s *report.GradedSubmission) string {
	var parts []string
	for _, p := range s.Phases {
		parts = append(parts, p.Name+"="+p.Duration.String())
	}
	return strings.Join(parts, ",")
}

// requireNothingRunning: no process mentions the work directory (clusters,
// supervisors, managers), and the directory is empty.
func requireNothingRunning(t *testing.T, work string) {
	t.Helper()
	procs, err := proc.Find(work)
	require.NoError(t, err)
	require.Empty(t, procs, "processes left running after grading")
	entries, err := os.ReadDir(work)
	require.NoError(t, err)
	require.Empty(t, entries, "files left in the work directory")
}

func readFile(t *testing.T, parts ...string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(parts...))
	require.NoError(t, err)
	return string(raw)
}

// cancelOn is an io.Writer for the (piped) progress lines that cancels a
// context when a line says a student reached a stage.
type cancelOn struct {
	line   string
	cancel context.CancelFunc
	buf    bytes.Buffer
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.line) {
		c.cancel()
	}
	return len(p), nil
}

// TestHangingSubmissionLeavesNothing: a manager that never gets ready,
// ignores SIGTERM and leaves a child behind is stopped at the wall-time
// limit, and so is everything of it on Ctrl-C (a cancelled context).
func TestHangingSubmissionLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	lab := loadLab(t, "lab-8.2")
	root := t.TempDir()
	subs := materialize(t, filepath.Join(root, "class"), []fixture{{Student: "hangs", Patches: []string{"testdata/grade/hangs.patch"}}}, true)
	work := filepath.Join(root, "work")
	require.NoError(t, os.MkdirAll(work, 0o755))
	s, _, stderr := iostreams.Test(false)
	opts := grade.Options{
		Lab: lab, Submissions: subs, Jobs: 1, Timeout: 40 * time.Second, ManagerReadyTimeout: 5 * time.Minute,
		OutDir: filepath.Join(root, "out"), Streams: s, Binaries: binaries, WorkDir: work,
	}
	gb, err := grade.Run(context.Background(), opts)
	require.NoError(t, err, "%s", stderr)
	sub, _ := gb.Submission("hangs")
	t.Logf("%s: %s %s phases=%s notes=%v", sub.Student, sub.Outcome, sub.Message, phases(sub), sub.Notes)
	require.Equal(t, report.OutcomeTimeout, sub.Outcome)
	require.Contains(t, sub.Message, "time limit of 40s")
	requireNothingRunning(t, work)

	// Ctrl-C while it deploys: Run returns the cancellation, records
	// nothing for the student, and leaves nothing running.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _, _ = iostreams.Test(false)
	s.ErrOut = &cancelOn{line: "hangs: deploying", cancel: cancel}
	opts.Streams, opts.Timeout, opts.OutDir = s, 5*time.Minute, filepath.Join(root, "out2")
	_, err = grade.Run(ctx, opts)
	require.ErrorIs(t, err, context.Canceled)
	requireNothingRunning(t, work)
	_, err = os.Stat(filepath.Join(opts.OutDir, grade.FeedbackDir, "hangs.md"))
	require.ErrorIs(t, err, os.ErrNotExist, "an interrupted submission is not graded")
}
