package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/iostreams"
)

func sample() *Report {
	patched := &CheckResult{ID: "replicas-patched", Title: "StatefulSet follows spec.replicas", Tasks: []string{"2.1", "6.1"}, Status: Pass,
		Message: "statefulset/my-database: spec.replicas = 2", Duration: Duration(1200 * time.Millisecond)}
	put := &CheckResult{ID: "replicas-by-patch", Title: "PATCH, not PUT", Tasks: []string{"2.1", "6.1"}, Status: Fail,
		Message:  "the operator changed statefulset/my-database with PUT (PUT ×1), not PATCH",
		Expected: "PATCH by op", Observed: "PUT ×1\x1b[2J",
		Object: "kind: StatefulSet\nspec:\n  replicas: 2",
		Events: []string{"Normal Created statefulset/my-database: created"},
		Logs:   []string{"INFO Updating StatefulSet\x07"}}
	warn := &CheckResult{ID: "pending-reason", Title: "reason DatabaseNotReady", Tasks: []string{"4.2"}, Status: Warn, Message: "never observed",
		Notes: []string{"reported as a warning"}}
	skipped := &CheckResult{ID: "conflict", Title: "409 then retry", Tasks: []string{"3.2"}, Status: Skipped, Message: "no audit log"}
	r := &Report{
		Lab: "lab-3.4", Title: "Advanced Client Operations", Lang: "en", Namespace: "labctl-lab-3-4-abcde",
		Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Duration: Duration(4900 * time.Millisecond),
		Tasks: []*Task{
			{ID: "2.1", Title: "Patch replicas", Hint: "take MergeFrom before the change", Points: 10, Checks: []*CheckResult{patched, put}},
			{ID: "3.2", Title: "Use the retry", Points: 5, Checks: []*CheckResult{skipped}},
			{ID: "4.2", Title: "Coordination", Points: 10, Checks: []*CheckResult{patched, warn}},
			{ID: "6.1", Title: "Test the patch", Points: 10, Checks: []*CheckResult{patched, put}, Hidden: true},
		},
	}
	r.Finish()
	return r
}

func TestFinishFoldsStatuses(t *testing.T) {
	r := sample()
	assert.Equal(t, Fail, r.Tasks[0].Status)
	assert.Equal(t, Skipped, r.Tasks[1].Status, "all checks skipped is not a pass")
	assert.Equal(t, Warn, r.Tasks[2].Status)
	assert.Equal(t, Summary{Tasks: 4, Passed: 1, Warned: 1, Failed: 2, Skipped: 1, Points: 10, MaxPoints: 35}, r.Summary)
	assert.Equal(t, Fail, r.Status)
	assert.False(t, r.AllPassed())
	assert.Equal(t, []string{"2.1", "3.2", "6.1"}, r.FailedTasks())
	assert.Equal(t, Error, TaskStatus([]*CheckResult{{Status: Pass}, {Status: Error}}))
	assert.Equal(t, Pass, TaskStatus([]*CheckResult{{Status: Pass}, {Status: Skipped}}))
}

func TestTextReport(t *testing.T) {
	s, out, _ := iostreams.Test(false)
	require.NoError(t, Write(s, sample(), FormatTable))
	text := out.String()
	assert.Contains(t, text, "✗ 2.1     Patch replicas  0/10")
	assert.Contains(t, text, "expected: PATCH by op")
	assert.Contains(t, text, "observed: PUT ×1")
	assert.Contains(t, text, "hint: take MergeFrom before the change")
	assert.Contains(t, text, "Normal Created statefulset/my-database")
	assert.Contains(t, text, "(details withheld)", "hidden tasks keep their evidence to themselves")
	assert.Contains(t, text, "1/4 tasks passed · 10/35 points · 1 with warnings · 2 failed · 1 skipped")
	assert.NotContains(t, text, "\x1b", "no escape sequence reaches the terminal")
	assert.NotContains(t, text, "\x07")
	assert.NotContains(t, text, "✓ StatefulSet follows", "passed checks are shown with -v only")
	assert.Equal(t, 1, strings.Count(text, "observed: PUT"), "a check shared by tasks shows its evidence once")

	s.Verbose = true
	out.Reset()
	require.NoError(t, WriteText(out, s.Styles(), sample(), true))
	assert.Contains(t, out.String(), "✓ StatefulSet follows spec.replicas")
	assert.Contains(t, out.String(), "replicas-patched · see task 2.1")
}

func TestTextReportInRussian(t *testing.T) {
	r := sample()
	r.Lang = "ru"
	var b bytes.Buffer
	s, _, _ := iostreams.Test(false)
	require.NoError(t, WriteText(&b, s.Styles(), r, false))
	assert.Contains(t, b.String(), "ожидалось: PATCH by op")
	assert.Contains(t, b.String(), "задач пройдено")
}

func TestJSONReportRoundTrips(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, sample()))
	var back Report
	require.NoError(t, json.Unmarshal(b.Bytes(), &back))
	assert.Equal(t, "lab-3.4", back.Lab)
	assert.Equal(t, Fail, back.Tasks[0].Status)
	assert.InDelta(t, 4.9, time.Duration(back.Duration).Seconds(), 0.001)
	assert.Contains(t, b.String(), `"duration": 4.9`)
}

func TestJUnitReport(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteJUnit(&b, sample()))
	var doc struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Skipped  int `xml:"skipped,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(b.Bytes(), &doc), b.String())
	require.Len(t, doc.Suites, 1)
	su := doc.Suites[0]
	assert.Equal(t, 4, su.Tests)
	assert.Equal(t, 2, su.Failures)
	assert.Equal(t, 1, su.Skipped)
	assert.Equal(t, "2.1 Patch replicas", su.Cases[0].Name)
	require.NotNil(t, su.Cases[0].Failure)
	assert.Contains(t, su.Cases[0].Failure.Message, "with PUT")
	assert.Contains(t, su.Cases[0].Failure.Text, "hint: take MergeFrom")
	assert.NotNil(t, su.Cases[1].Skipped)
	assert.False(t, strings.ContainsRune(b.String(), 0x1b))
}

func TestClean(t *testing.T) {
	cases := map[string]string{
		"plain":                     "plain",
		"red\x1b[31mtext\x1b[0m":    "redtext",
		"title\x1b]0;pwned\x07 end": "title end",
		"bell\x07 and \r return":    "bell and  return",
		"keep\nlines\tand tabs":     "keep\nlines\tand tabs",
		"bidi \u202eevil":           "bidi evil",
		"bad \xff utf8":             "bad \ufffd utf8",
		"c1 \u009b control":         "c1  control",
	}
	for in, want := range cases {
		assert.Equal(t, want, Clean(in), "%q", in)
	}
	assert.Equal(t, "a b c", CleanLine("a\nb\tc"))
}

// A task's headline is its first real failure, not a check that never ran
// because a gate before it failed.
func TestTaskHeadline(t *testing.T) {
	task := &Task{Checks: []*CheckResult{
		{ID: "a", Status: Pass},
		{ID: "b", Status: Error, Message: "not run: gate did not pass"},
		{ID: "c", Status: Error, Message: "the API refused the dry run"},
		{ID: "d", Status: Fail, Message: "the operator is forbidden to list backups"},
	}}
	require.Equal(t, "d", task.Headline().ID)
	task.Checks = task.Checks[:3]
	require.Equal(t, "c", task.Headline().ID)
	task.Checks = task.Checks[:2]
	require.Equal(t, "b", task.Headline().ID)
	task.Checks = task.Checks[:1]
	require.Nil(t, task.Headline())
}

// The checks that could not decide are those in error for a reason of
// their own, not those that never ran behind a failed step.
func TestUndecided(t *testing.T) {
	r := &Report{Tasks: []*Task{
		{ID: "1", Checks: []*CheckResult{
			{ID: "a", Status: Pass},
			{ID: "b", Status: Error, Message: NotRun + "step 2 (apply Database db) failed"},
			{ID: "c", Status: Error, Message: "the API refused the dry run"},
		}},
		{ID: "2", Checks: []*CheckResult{
			{ID: "d", Status: Fail, Message: "not run: is also how a failure may begin"},
			{ID: "e", Status: Skipped, Message: NotRun + "gate 1 failed"},
			{ID: "f", Status: Error, Message: "watching db: connection refused"},
		}},
	}}
	var ids []string
	for _, c := range r.Undecided() {
		ids = append(ids, c.ID)
	}
	require.Equal(t, []string{"c", "f"}, ids)
	require.Empty(t, (&Report{}).Undecided())
}

// With several operators on one cluster, the report says which it judged:
// its identity and its project, in the table and in JSON.
func TestReportNamesTheOperatorJudged(t *testing.T) {
	r := sample()
	r.Operator = "system:serviceaccount:postgres-operator-system:postgres-operator-controller-manager"
	r.OperatorProject, r.OperatorDir = "postgres-operator", "/home/s/postgres-operator"
	s, out, _ := iostreams.Test(false)
	require.NoError(t, Write(s, r, FormatTable))
	assert.Contains(t, out.String(), "operator system:serviceaccount:postgres-operator-system:postgres-operator-controller-manager (postgres-operator)")
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, r))
	assert.Contains(t, b.String(), `"operatorProject": "postgres-operator"`)
	assert.Contains(t, b.String(), `"operatorDir": "/home/s/postgres-operator"`)
}
