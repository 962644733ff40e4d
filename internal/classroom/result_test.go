package classroom_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/classroom"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// reportFor builds what verify reports for a lab: each task with the checks
// its steps give evidence for, statused by status(checkID).
func reportFor(lab *labs.Lab, status func(task, check string) report.Result) *report.Report {
	r := &report.Report{Lab: lab.ID, Title: lab.Title.In("en"), Lang: "en"}
	for _, lt := range lab.Tasks {
		rt := &report.Task{ID: lt.ID, Title: lt.Title.In("en"), Hint: lt.Hint.In("en"), Points: lt.Points, Hidden: lt.Hidden}
		for _, sc := range lab.Scenarios {
			for _, st := range sc.Steps {
				if !st.IsAssertion() || !contains(st.Tasks, lt.ID) {
					continue
				}
				c := &report.CheckResult{ID: st.ID, Title: st.Title.In("en"), Tasks: st.Tasks, Duration: report.Duration(250 * time.Millisecond)}
				c.Status = status(lt.ID, st.ID)
				if c.Status == report.Fail {
					c.Message = "the Backup never became Completed"
					c.Expected = "status.phase Completed"
					c.Observed = "status.phase Pending"
					c.Events = []string{"Warning BackupFailed job failed"}
				}
				rt.Checks = append(rt.Checks, c)
			}
		}
		r.Tasks = append(r.Tasks, rt)
	}
	r.Finish()
	return r
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// render runs what `verify -o classroom` prints, reads it back as the
// workflow and the reporter do (one runner per task, each its task's
// points as max_score), and joins the runners' tests into one result for
// the assertions on the lab as a whole.
func render(t *testing.T, lab *labs.Lab, rep *report.Report) (string, *classroom.Result) {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, classroom.Write(&out, lab, rep, ""))
	return joinRunners(t, lab, out.String())
}

func joinRunners(t *testing.T, lab *labs.Lab, out string) (string, *classroom.Result) {
	t.Helper()
	require.True(t, strings.HasSuffix(out, "\n"))
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		require.Less(t, len(line), 128<<10, "each $GITHUB_OUTPUT value fits in an environment variable")
	}
	runners, err := classroom.ReadOutputs(out)
	require.NoError(t, err)
	require.Len(t, runners, len(lab.Tasks), "one runner per task")
	joined := &classroom.Result{Version: 1, Status: classroom.StatusPass}
	for i, r := range runners {
		lt := lab.Tasks[i]
		require.Equal(t, classroom.TaskRunner(lt.ID), r.Runner)
		require.Len(t, r.Result.Tests, 1)
		require.Equal(t, lt.Points, r.Result.MaxScore, "a runner's max_score is its task's points")
		require.Equal(t, r.Result.Tests[0].Status, r.Result.Status)
		joined.MaxScore += r.Result.MaxScore
		joined.Tests = append(joined.Tests, r.Result.Tests...)
		switch st := r.Result.Status; {
		case st == classroom.StatusFail:
			joined.Status = st
		case st == classroom.StatusError && joined.Status == classroom.StatusPass:
			joined.Status = st
		}
	}
	pretty, err := json.MarshalIndent(joined, "", "  ")
	require.NoError(t, err)
	return string(pretty) + "\n", joined
}

// reporterTotals computes the totals the Classroom reporter shows from its
// runners, as its code does: the summary table scores a runner (tests
// passed ÷ tests) × max_score; the recorded points are the sum of the
// tests' scores out of the sum of max_score.
func reporterTotals(runners []classroom.TaskResult) (table, recorded float64, max int) {
	for _, r := range runners {
		passed := 0
		for _, test := range r.Result.Tests {
			if test.Status == classroom.StatusPass {
				passed++
			}
			recorded += test.Score
		}
		table += float64(passed) / float64(len(r.Result.Tests)) * float64(r.Result.MaxScore)
		max += r.Result.MaxScore
	}
	return table, recorded, max
}

// Every total the student sees agrees with the lab's points, however
// unequal its tasks: the reporter's table and the recorded points equal
// labctl grade's score of the same report.
func TestReporterTotalsAgreeWithTheLabsPoints(t *testing.T) {
	lab := lab82(t)
	failing := map[string]bool{"2.2": true, "4.3": true, "1.4": true}
	rep := reportFor(lab, func(task, _ string) report.Result {
		if failing[task] {
			return report.Fail
		}
		return report.Pass
	})
	var out bytes.Buffer
	require.NoError(t, classroom.Write(&out, lab, rep, ""))
	runners, err := classroom.ReadOutputs(out.String())
	require.NoError(t, err)
	table, recorded, max := reporterTotals(runners)
	_, want := grade.Score(lab, rep, grade.CreditTasks)
	require.Less(t, want, float64(lab.MaxPoints()), "some points are lost")
	require.Equal(t, lab.MaxPoints(), max)
	require.InDelta(t, want, table, 1e-9, "the reporter's table")
	require.InDelta(t, want, recorded, 1e-9, "the points Classroom records")
}

// A submission whose operator does not build or deploy is reported, every
// task failed with the reason, and worth 0 rather than no grade.
func TestFailedResult(t *testing.T) {
	lab := lab82(t)
	var out bytes.Buffer
	require.NoError(t, classroom.WriteResult(&out, lab, classroom.FailedResult(lab, "en", "labctl up failed: the operator does not compile: cmd/main.go:12: undefined: foo")))
	_, res := joinRunners(t, lab, out.String())
	require.Equal(t, classroom.StatusFail, res.Status)
	require.Equal(t, lab.MaxPoints(), res.MaxScore)
	for _, test := range res.Tests {
		require.Equal(t, classroom.StatusFail, test.Status)
		require.Zero(t, test.Score)
		require.Contains(t, test.Message, "undefined: foo")
	}
}

func TestTaskRunnerNames(t *testing.T) {
	require.Equal(t, "task_6_2", classroom.TaskRunner("6.2"))
	require.Equal(t, "task_b_1", classroom.TaskRunner("B-1"))
	require.Equal(t, "TASK_6_2_RESULTS", classroom.ResultsEnv(classroom.TaskRunner("6.2")))
}

func sumMax(res *classroom.Result) (max int, score float64) {
	for _, t := range res.Tests {
		max += t.MaxScore
		score += t.Score
	}
	return max, score
}

func TestResultPassing(t *testing.T) {
	lab := lab82(t)
	rep := reportFor(lab, func(string, string) report.Result { return report.Pass })
	pretty, res := render(t, lab, rep)
	golden(t, "result-pass.json", []byte(pretty))

	require.Equal(t, 1, res.Version)
	require.Equal(t, classroom.StatusPass, res.Status)
	require.Equal(t, lab.MaxPoints(), res.MaxScore)
	require.Len(t, res.Tests, len(lab.Tasks), "one test per task")
	max, score := sumMax(res)
	require.Equal(t, lab.MaxPoints(), max)
	require.Equal(t, float64(lab.MaxPoints()), score)
	for i, test := range res.Tests {
		require.Equal(t, lab.Tasks[i].Points, test.MaxScore)
		require.Equal(t, classroom.StatusPass, test.Status)
		require.Equal(t, "labctl verify lab-8.2 --task "+lab.Tasks[i].ID, test.TestCode)
	}
}

func TestResultFailing(t *testing.T) {
	lab := lab82(t)
	failTask, errTask, skipTask := "2.2", "4.3", "4.2"
	skipped := ""
	rep := reportFor(lab, func(task, check string) report.Result {
		switch task {
		case failTask:
			return report.Fail
		case errTask:
			return report.Error
		case skipTask:
			// One check of the task could not be provoked here: it
			// costs nothing, as in `labctl grade`.
			if skipped == "" || skipped == check {
				skipped = check
				return report.Skipped
			}
		}
		return report.Pass
	})
	pretty, res := render(t, lab, rep)
	golden(t, "result-fail.json", []byte(pretty))

	require.Equal(t, classroom.StatusFail, res.Status)
	max, score := sumMax(res)
	require.Equal(t, lab.MaxPoints(), max, "the tests' max_score add up to the lab's points")
	lost := 0
	for i, test := range res.Tests {
		lt := lab.Tasks[i]
		switch lt.ID {
		case failTask:
			require.Equal(t, classroom.StatusFail, test.Status)
			require.Zero(t, test.Score)
			// The text report's evidence and hint.
			require.Contains(t, test.Message, "expected: status.phase Completed")
			require.Contains(t, test.Message, "observed: status.phase Pending")
			require.Contains(t, test.Message, "Warning BackupFailed job failed")
			require.Contains(t, test.Message, "hint: "+report.CleanLine(lt.Hint.In("en")))
			lost += lt.Points
		case errTask:
			require.Equal(t, classroom.StatusError, test.Status)
			require.Zero(t, test.Score)
			lost += lt.Points
		case skipTask:
			require.Equal(t, classroom.StatusPass, test.Status)
			require.Equal(t, float64(lt.Points), test.Score)
		default:
			require.Equal(t, classroom.StatusPass, test.Status)
		}
	}
	require.Equal(t, float64(lab.MaxPoints()-lost), score)
}

func TestResultHiddenTaskWithholdsEvidence(t *testing.T) {
	lab := &labs.Lab{ID: "lab-h", Tasks: []labs.Task{
		{ID: "1", Points: 4, Title: labs.Text{EN: "Shown"}, Hint: labs.Text{EN: "look at the status"}},
		{ID: "2", Points: 6, Title: labs.Text{EN: "Secret"}, Hint: labs.Text{EN: "the secret hint"}, Hidden: true},
	}, Scenarios: []labs.Scenario{{Name: "s", Steps: []labs.Step{
		{ID: "a", Tasks: []string{"1"}, Check: &labs.GoCheck{}},
		{ID: "b", Tasks: []string{"2"}, Check: &labs.GoCheck{}},
	}}}}
	rep := reportFor(lab, func(string, string) report.Result { return report.Fail })
	_, res := render(t, lab, rep)
	require.Contains(t, res.Tests[0].Message, "hint: look at the status")
	require.NotContains(t, res.Tests[1].Message, "secret")
	require.NotContains(t, res.Tests[1].Message, "observed")
	require.Equal(t, 10, res.MaxScore)
}

func TestResultOnlySomeTasksVerified(t *testing.T) {
	lab := lab82(t)
	rep := reportFor(lab, func(string, string) report.Result { return report.Pass })
	rep.Tasks = rep.Tasks[:1] // verify --task 1.1
	rep.Finish()
	_, res := render(t, lab, rep)
	require.Equal(t, classroom.StatusError, res.Status)
	require.Len(t, res.Tests, len(lab.Tasks))
	require.Equal(t, classroom.StatusPass, res.Tests[0].Status)
	require.Equal(t, classroom.StatusError, res.Tests[1].Status)
	require.Equal(t, "not verified in this run", res.Tests[1].Message)
}

// Linux starts no program with an environment variable over 128 KiB: the
// reporter gets the result in one, so long evidence is cut.
func TestResultFitsInAnEnvironmentVariable(t *testing.T) {
	lab := lab82(t)
	rep := reportFor(lab, func(string, string) report.Result { return report.Fail })
	long := strings.Repeat("operator log line with ünïcode 🙂\n", 2000)
	for _, task := range rep.Tasks {
		for _, c := range task.Checks {
			c.Logs = strings.Split(long, "\n")
		}
	}
	var out bytes.Buffer
	require.NoError(t, classroom.Write(&out, lab, rep, ""))
	require.Less(t, out.Len(), 128<<10)
	_, res := joinRunners(t, lab, out.String())
	for _, test := range res.Tests {
		require.LessOrEqual(t, len(test.Message), classroom.MessageBudget/len(lab.Tasks))
		require.True(t, utf8.ValidString(test.Message))
		require.True(t, strings.HasPrefix(test.Message, "✗ "+test.Name[:strings.IndexByte(test.Name, ' ')]), "the start of the evidence is kept")
		require.Contains(t, test.Message, "(cut: the whole report is in the log of the verify step)")
		require.Regexp(t, `\n    hint: [^\n]+$`, test.Message, "and the hint")
	}
}
