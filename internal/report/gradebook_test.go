package report_test

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/report"
)

func sampleGradebook() (*report.Gradebook, *report.GradedSubmission) {
	rep := &report.Report{Lab: "lab-8.2", Lang: "en", Tasks: []*report.Task{
		{ID: "1.1", Title: "Scaffold", Points: 5, Checks: []*report.CheckResult{{ID: "scaffold", Title: "PROJECT lists Backup", Status: report.Pass}}},
		{ID: "3.1", Title: "BackupReady", Points: 10, Hint: "Set the condition <BackupReady>", Checks: []*report.CheckResult{{
			ID: "backup-ready", Title: "The Backup has BackupReady=True", Status: report.Fail,
			Message: "no BackupReady condition\x1b[31m", Expected: "BackupReady=True", Observed: "no condition",
			Object: "status:\n  phase: Completed\n```", Events: []string{"Normal BackupCompleted"}, Logs: []string{"backup done"},
		}}},
		{ID: "9.9", Title: "Secret task", Points: 5, Hidden: true, Checks: []*report.CheckResult{{
			ID: "secret-check", Title: "The secret check", Status: report.Fail, Message: "the hidden evidence",
		}}},
	}}
	sub := &report.GradedSubmission{
		Student: "alice", Source: "/subs/alice", Graded: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
		Duration: report.Duration(42 * time.Second), Outcome: report.OutcomeGraded, Score: 5, MaxPoints: 20, Report: rep,
		Tasks: []report.TaskScore{
			{ID: "1.1", Points: 5, Score: 5, Status: report.Pass, Passed: 1, Checks: 1},
			{ID: "3.1", Points: 10, Score: 0, Status: report.Fail, Checks: 1},
			{ID: "9.9", Points: 5, Score: 0, Status: report.Fail, Checks: 1},
		},
	}
	gb := &report.Gradebook{Lab: "lab-8.2", Title: "Composing Operators", Lang: "en", MaxPoints: 20,
		Tasks: []report.GradeTask{{ID: "1.1", Title: "Scaffold", Points: 5}, {ID: "3.1", Title: "BackupReady", Points: 10}, {ID: "9.9", Title: "Secret task", Points: 5, Hidden: true}}}
	gb.Put(sub)
	return gb, sub
}

func TestFeedbackWithholdsHiddenTasks(t *testing.T) {
	gb, sub := sampleGradebook()
	var b bytes.Buffer
	require.NoError(t, report.WriteFeedbackMarkdown(&b, gb, sub, false))
	md := b.String()
	require.Contains(t, md, "**Score: 5 / 20**")
	require.Contains(t, md, "## What passed\n\n- **1.1** Scaffold")
	require.Contains(t, md, "### 3.1 BackupReady (0 / 10)")
	require.Contains(t, md, "expected: `BackupReady=True`")
	require.Contains(t, md, "**Hint:** Set the condition &lt;BackupReady&gt;")
	require.Contains(t, md, "````yaml\n  status:", "a fence longer than the backticks inside")
	require.NotContains(t, md, "\x1b", "control characters from the cluster are stripped")
	require.Contains(t, md, "1 hidden task(s), worth 5 points")
	for _, secret := range []string{"Secret task", "secret-check", "The secret check", "the hidden evidence", "9.9"} {
		require.NotContains(t, md, secret)
	}

	b.Reset()
	require.NoError(t, report.WriteFeedbackMarkdown(&b, gb, sub, true))
	require.Contains(t, b.String(), "### 9.9 Secret task (0 / 5)")
	require.Contains(t, b.String(), "the hidden evidence")
}

func TestFeedbackBuildFailure(t *testing.T) {
	gb, sub := sampleGradebook()
	sub.Outcome, sub.Report, sub.Score = report.OutcomeBuildFailed, nil, 0
	sub.BuildErrors = []string{"# example/internal/controller", "backup_controller.go:470:29: cannot use time.Now()"}
	var b bytes.Buffer
	require.NoError(t, report.WriteFeedbackMarkdown(&b, gb, sub, false))
	require.Contains(t, b.String(), "does not build")
	require.Contains(t, b.String(), "```\n# example/internal/controller\nbackup_controller.go:470:29: cannot use time.Now()\n```")
	require.NotContains(t, b.String(), "## What did not pass", "no empty sections when no check ran")
}

func TestGradebookCSV(t *testing.T) {
	gb, _ := sampleGradebook()
	gb.Put(&report.GradedSubmission{Student: "=cmd", Score: 2.345, Tasks: []report.TaskScore{{ID: "1.1", Score: 2.345}}})
	var b bytes.Buffer
	require.NoError(t, report.WriteGradebookCSV(&b, gb))
	require.Equal(t, "student,total,max,1.1,3.1,9.9\n'=cmd,2.35,20,2.35,0,0\nalice,5,20,5,0,0\n", b.String())

	// Not graded (the grader failed): no grade, not a zero.
	gb.Put(&report.GradedSubmission{Student: "bob", Outcome: report.OutcomeError, Message: "its cluster did not start"})
	b.Reset()
	require.NoError(t, report.WriteGradebookCSV(&b, gb))
	require.Contains(t, b.String(), "\nbob,,20,,,\n")
}

func TestGradebookJUnit(t *testing.T) {
	gb, _ := sampleGradebook()
	var b bytes.Buffer
	require.NoError(t, report.WriteGradebookJUnit(&b, gb))
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Props []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"properties>property"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(b.Bytes(), &doc))
	require.Equal(t, 3, doc.Tests)
	require.Equal(t, 2, doc.Failures)
	require.Equal(t, "alice", doc.Suites[0].Name)
	require.Equal(t, "score", doc.Suites[0].Props[0].Name)
	require.Equal(t, "5", doc.Suites[0].Props[0].Value)
	require.True(t, strings.HasSuffix(doc.Suites[0].Cases[2].Name, "[hidden]"), "the instructor's JUnit shows hidden tasks")
	require.Equal(t, "no BackupReady condition", doc.Suites[0].Cases[1].Failure.Message)
}

// TestGradebookJSONRecordsTheRun: results.json keeps the run (version,
// limits), and files written before it was recorded still read.
func TestGradebookJSONRecordsTheRun(t *testing.T) {
	gb := fixtureClass()
	var b bytes.Buffer
	require.NoError(t, report.WriteGradebookJSON(&b, gb))
	again, err := report.ReadGradebookJSON(&b)
	require.NoError(t, err)
	require.Equal(t, gb.Run, again.Run)

	old, err := report.ReadGradebookJSON(strings.NewReader(`{"lab":"lab-8.2","tasks":[],"maxPoints":0,"credit":"tasks","submissions":[]}`))
	require.NoError(t, err)
	require.Nil(t, old.Run)
}

// The feedback names the grading policy, and a check the policy hides
// counts but shows neither its title nor its evidence.
func TestFeedbackPolicyAndHiddenChecks(t *testing.T) {
	gb, sub := sampleGradebook()
	var b bytes.Buffer
	require.NoError(t, report.WriteFeedbackMarkdown(&b, gb, sub, false))
	require.Contains(t, b.String(), "Grading policy: the lab's defaults")

	gb.Policy = "strict section B"
	sub.Report.Tasks[1].Checks[0].Hidden = true
	b.Reset()
	require.NoError(t, report.WriteFeedbackMarkdown(&b, gb, sub, false))
	md := b.String()
	require.Contains(t, md, "Grading policy: strict section B")
	require.Contains(t, md, "### 3.1 BackupReady (0 / 10)")
	require.Contains(t, md, "*a hidden check* — failed")
	for _, secret := range []string{"The Backup has BackupReady=True", "no BackupReady condition", "BackupCompleted"} {
		require.NotContains(t, md, secret)
	}
}

// The feedback's duration reads as words of its language.
func TestFeedbackDurationInItsLanguage(t *testing.T) {
	gb, sub := sampleGradebook()
	sub.Duration = report.Duration(95 * time.Second)
	var b bytes.Buffer
	require.NoError(t, report.WriteFeedbackMarkdown(&b, gb, sub, false))
	require.Contains(t, b.String(), " · 1 min 35 s")
	gb.Lang = "ru"
	b.Reset()
	require.NoError(t, report.WriteFeedbackMarkdown(&b, gb, sub, false))
	require.Contains(t, b.String(), " · 1 мин 35 с")
}
