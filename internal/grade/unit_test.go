package grade_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/userr"
)

func TestParseRoster(t *testing.T) {
	in := "\ufeffStudent, Repo ,Ref\n# a comment\n\nalice,https://git.example.edu/alice/op.git,lab-8.2\nbob,../bob-op,\n"
	subs, err := grade.ParseRoster(strings.NewReader(in), "/courses/k8s")
	require.NoError(t, err)
	require.Equal(t, []grade.Submission{
		{Student: "alice", Repo: "https://git.example.edu/alice/op.git", Ref: "lab-8.2"},
		{Student: "bob", Repo: "/courses/bob-op"},
	}, subs)
	require.Equal(t, "https://git.example.edu/alice/op.git@lab-8.2", subs[0].Source())

	subs, err = grade.ParseRoster(strings.NewReader("id,dir\ncarol,carol\ndan,/abs/dan\n"), "/base")
	require.NoError(t, err)
	require.Equal(t, "/base/carol", subs[0].Dir)
	require.Equal(t, "/abs/dan", subs[1].Dir)

	for name, bad := range map[string]string{
		"no header":     "alice,./alice\n",
		"no source":     "student,ref\nalice,main\n",
		"duplicate":     "student,dir\nalice,a\nalice,b\n",
		"bad id":        "student,dir\n../etc,a\n",
		"both":          "student,dir,repo\nalice,a,https://x/y.git\n",
		"neither":       "student,dir\nalice,\n",
		"option inject": "student,repo\nalice,--upload-pack=evil\n",
		"ref on dir":    "student,dir,ref\nalice,a,main\n",
	} {
		_, err := grade.ParseRoster(strings.NewReader(bad), "/")
		require.Error(t, err, name)
	}
}

func TestSelect(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"alice", "Bob Smith"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	subs, err := grade.Select([]string{filepath.Join(root, "alice"), filepath.Join(root, "Bob Smith")}, nil)
	require.NoError(t, err)
	require.Equal(t, "alice", subs[0].Student)
	require.Equal(t, "Bob-Smith", subs[1].Student)

	// Two directories with one name need a roster.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "x", "alice"), 0o755))
	_, err = grade.Select([]string{filepath.Join(root, "alice"), filepath.Join(root, "x", "alice")}, nil)
	require.Equal(t, userr.ExitUsage, userr.Code(err))

	// With a roster, arguments pick students; none means everyone.
	roster := []grade.Submission{{Student: "alice", Dir: "/a"}, {Student: "carol", Repo: "https://x/c.git"}}
	subs, err = grade.Select(nil, roster)
	require.NoError(t, err)
	require.Len(t, subs, 2)
	subs, err = grade.Select([]string{"carol"}, roster)
	require.NoError(t, err)
	require.Equal(t, roster[1:], subs)
	_, err = grade.Select([]string{"nobody"}, roster)
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	_, err = grade.Select([]string{filepath.Join(root, "missing")}, nil)
	require.Equal(t, userr.ExitUsage, userr.Code(err))
}

// scoringLab has two tasks: one whose scenario is guarded by a gate.
func scoringLab() *labs.Lab {
	return &labs.Lab{
		ID: "lab-t",
		Tasks: []labs.Task{
			{ID: "1", Points: 10},
			{ID: "2", Points: 6},
			{ID: "3", Points: 5, Hidden: true},
		},
		Scenarios: []labs.Scenario{{Name: "s", Steps: []labs.Step{
			{ID: "ready", Tasks: []string{"2"}, Gate: true},
			{ID: "children", Tasks: []string{"2"}},
			{ID: "a", Tasks: []string{"1"}},
			{ID: "b", Tasks: []string{"1"}},
			{ID: "c", Tasks: []string{"1", "3"}},
		}}},
	}
}

func checkSet(statuses map[string]report.Result) map[string]*report.CheckResult {
	out := map[string]*report.CheckResult{}
	for id, st := range statuses {
		out[id] = &report.CheckResult{ID: id, Title: "check " + id, Status: st}
	}
	return out
}

func reportOf(lab *labs.Lab, checks map[string]*report.CheckResult) *report.Report {
	r := &report.Report{Lab: lab.ID}
	for _, lt := range lab.Tasks {
		rt := &report.Task{ID: lt.ID, Points: lt.Points, Hidden: lt.Hidden}
		for _, sc := range lab.Scenarios {
			for _, st := range sc.Steps {
				for _, tid := range st.Tasks {
					if tid == lt.ID && checks[st.ID] != nil {
						rt.Checks = append(rt.Checks, checks[st.ID])
					}
				}
			}
		}
		r.Tasks = append(r.Tasks, rt)
	}
	r.Finish()
	return r
}

func TestScorePartialCreditAndGates(t *testing.T) {
	lab := scoringLab()
	// Two of three checks of task 1 pass (one with a warning): 2/3 of 10.
	// Task 2's gate passes but the check after it fails: half of 6.
	rep := reportOf(lab, checkSet(map[string]report.Result{
		"ready": report.Pass, "children": report.Fail, "a": report.Pass, "b": report.Warn, "c": report.Fail,
	}))
	tasks, total := grade.Score(lab, rep, grade.CreditChecks)
	require.Equal(t, 6.67, tasks[0].Score)
	require.Equal(t, 2, tasks[0].Passed)
	require.Equal(t, 3.0, tasks[1].Score)
	require.Equal(t, 0.0, tasks[2].Score)
	require.Equal(t, 9.67, total)

	// A failed gate leaves the task nothing, even with checks that passed.
	rep = reportOf(lab, checkSet(map[string]report.Result{
		"ready": report.Fail, "children": report.Pass, "a": report.Pass, "b": report.Pass, "c": report.Pass,
	}))
	tasks, total = grade.Score(lab, rep, grade.CreditChecks)
	require.Equal(t, 0.0, tasks[1].Score)
	require.Contains(t, tasks[1].Reason, "check ready")
	require.Equal(t, 10.0+5.0, total)

	// Skipped checks neither earn nor cost: one of the two that ran
	// passed. No report, nothing at all.
	rep = reportOf(lab, checkSet(map[string]report.Result{"a": report.Skipped, "b": report.Pass, "c": report.Error}))
	tasks, _ = grade.Score(lab, rep, grade.CreditChecks)
	require.Equal(t, 5.0, tasks[0].Score)
	require.Equal(t, 2, tasks[0].Checks)
	require.Equal(t, 1, tasks[0].Skipped)
	tasks, total = grade.Score(lab, nil, grade.CreditChecks)
	require.Zero(t, total)
	require.Len(t, tasks, 3)
}

func TestScoreAllOrNothing(t *testing.T) {
	lab := scoringLab()
	rep := reportOf(lab, checkSet(map[string]report.Result{
		"ready": report.Pass, "children": report.Fail, "a": report.Pass, "b": report.Warn, "c": report.Pass,
	}))
	tasks, total := grade.Score(lab, rep, grade.CreditTasks)
	require.Equal(t, 10.0, tasks[0].Score, "pass and warn both count")
	require.Equal(t, 0.0, tasks[1].Score)
	require.Equal(t, 5.0, tasks[2].Score)
	require.Equal(t, 15.0, total)
}

func TestScoreTasksSkippedChecksCostNothing(t *testing.T) {
	lab := scoringLab()
	// A check that could not be provoked here (skipped) beside passing
	// ones: verify passes the task, and so does the score.
	rep := reportOf(lab, checkSet(map[string]report.Result{
		"ready": report.Pass, "children": report.Skipped, "a": report.Pass, "b": report.Skipped, "c": report.Skipped,
	}))
	tasks, total := grade.Score(lab, rep, grade.CreditTasks)
	require.Equal(t, 10.0, tasks[0].Score)
	require.Equal(t, 6.0, tasks[1].Score)
	require.Equal(t, 0.0, tasks[2].Score, "only skipped checks: nothing was shown")
	require.Equal(t, report.Skipped, tasks[2].Status)
	require.Equal(t, 16.0, total)
}

// A check that could not run (a conflict that could not be provoked
// against an operator that only patches) costs nothing, under either
// credit, and the feedback's status, count and sections agree with the
// points.
func TestSkippedCheckKeepsThePoints(t *testing.T) {
	lab := scoringLab()
	rep := reportOf(lab, checkSet(map[string]report.Result{
		"ready": report.Pass, "children": report.Pass, "a": report.Pass, "b": report.Skipped, "c": report.Pass,
	}))
	for _, credit := range grade.Credits {
		tasks, total := grade.Score(lab, rep, credit)
		require.Equal(t, 10.0, tasks[0].Score, credit)
		require.Equal(t, report.Pass, tasks[0].Status, credit)
		require.Equal(t, 2, tasks[0].Passed, credit)
		require.Equal(t, 2, tasks[0].Checks, credit)
		require.Equal(t, 1, tasks[0].Skipped, credit)
		require.Equal(t, 21.0, total, credit)

		gb := &report.Gradebook{Lab: "lab-x", Lang: "en", Tasks: grade.Columns(lab, "en"), MaxPoints: 21}
		sub := &report.GradedSubmission{Student: "s", Outcome: report.OutcomeGraded, Score: total, MaxPoints: 21, Tasks: tasks, Report: rep}
		var b bytes.Buffer
		require.NoError(t, report.WriteFeedbackMarkdown(&b, gb, sub, false))
		md := b.String()
		require.Contains(t, md, "| 10 / 10 | ✓ passed (2/2 checks, 1 skipped) |", credit)
		require.Contains(t, md, "  - - check b — skipped\n", "the skipped check is named under what passed")
		require.NotContains(t, md, "What did not pass", credit)
	}

	// All of a task's checks skipped: nothing was checked, nothing earned,
	// and the task says so.
	rep = reportOf(lab, checkSet(map[string]report.Result{
		"ready": report.Pass, "children": report.Pass, "a": report.Skipped, "b": report.Skipped, "c": report.Skipped,
	}))
	tasks, _ := grade.Score(lab, rep, grade.CreditTasks)
	require.Equal(t, report.Skipped, tasks[0].Status)
	require.Zero(t, tasks[0].Score)
	require.Contains(t, tasks[0].Reason, "could run")
}

// A check stopped by a gate in another task is a skip, not an error: its
// task is not judged (no points, as verify decides it, under either
// credit: the checks that ran could be absences an idle operator passes)
// and says which gate stopped it; the mistake is charged to the gate's task.
// An ordinary skip (no audit log here) still costs nothing.
func TestChecksBehindAFailedGateAreNotJudged(t *testing.T) {
	lab := scoringLab()
	checks := checkSet(map[string]report.Result{
		"ready": report.Fail, "children": report.Skipped, "a": report.Pass, "b": report.Skipped, "c": report.Skipped,
	})
	for _, id := range []string{"children", "b"} {
		checks[id].Message, checks[id].BlockedBy = `not run: gate 2 "check ready" failed`, "ready"
	}
	rep := reportOf(lab, checks)
	for _, credit := range grade.Credits {
		tasks, total := grade.Score(lab, rep, credit)
		require.Equal(t, report.Skipped, tasks[0].Status, credit)
		require.Zero(t, tasks[0].Score, credit)
		require.Equal(t, float64(rep.Tasks[0].Score), tasks[0].Score, "verify and grade agree (%s)", credit)
		require.Contains(t, tasks[0].Reason, `gate 2 "check ready" failed`, credit)
		require.Equal(t, report.Fail, tasks[1].Status, "the gate's task is charged (%s)", credit)
		require.Zero(t, total, credit)
	}
	require.Equal(t, report.Skipped, rep.Tasks[0].Status)
	require.Equal(t, 1, rep.Summary.Failed, "one mistake, one failed task")
}
