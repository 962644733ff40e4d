package grade_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// Two checks of this test alone, standing in for checks whose API call
// failed: one cannot decide the first time it runs for a project (a box
// grades one submission, so the count is the box's), the other never can.
var undecidedRuns sync.Map // project dir → *atomic.Int32

func init() {
	checks.Register(checks.Definition{
		Name: "test-undecided-once",
		Doc:  "cannot decide on its first run for a project, passes on the next (grade's tests)",
		Run: func(_ context.Context, c *checks.Context, _ any) checks.Outcome {
			n, _ := undecidedRuns.LoadOrStore(c.ProjectDir(), new(atomic.Int32))
			if n.(*atomic.Int32).Add(1) == 1 {
				return checks.Outcome{Status: report.Error, Message: "the API server went away"}
			}
			return checks.Outcome{Status: report.Pass, Message: "decided on a later run"}
		},
	})
	checks.Register(checks.Definition{
		Name: "test-undecided-always",
		Doc:  "never decides (grade's tests)",
		Run: func(context.Context, *checks.Context, any) checks.Outcome {
			return checks.Outcome{Status: report.Error, Message: "the API server is gone for good"}
		},
	})
}

const undecidedLab = `apiVersion: labctl.dev/v1alpha1
kind: Lab
id: lab-9.9
module: 9
project: website
title: {en: Checks that cannot decide, ru: "Проверки, которые не могут решить"}
source: internal/grade/undecided_test.go
defaults:
  timeout: {local: 6s, kind: 30s}
  for: {local: 2s, kind: 5s}
tasks:
- id: "1.1"
  points: 40
  title: {en: Decided when measured again, ru: Решено при повторном измерении}
  hint: {en: Nothing to do., ru: Ничего делать не нужно.}
- id: "1.2"
  points: 60
  title: {en: Never decided, ru: Не решено никогда}
  hint: {en: Nothing to do., ru: Ничего делать не нужно.}
scenarios:
- name: undecided
  title: {en: Checks that cannot decide, ru: "Проверки, которые не могут решить"}
  steps:
  - id: once
    tasks: ["1.1"]
    title: {en: Decides on its second run, ru: Решает со второго раза}
    check: {name: test-undecided-once}
  - id: always
    tasks: ["1.2"]
    title: {en: Never decides, ru: Не решает никогда}
    check: {name: test-undecided-always}
`

// TestGradeMeasuresAgainWhatCouldNotBeDecided: a verification with checks
// that could not decide is not a measurement of the submission. Grading
// runs the checks once more; what the second run decides stands, and what
// it still cannot decide earns nothing, its task saying why.
func TestGradeMeasuresAgainWhatCouldNotBeDecided(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	lab, err := labs.Parse("undecided", []byte(undecidedLab))
	require.NoError(t, err)
	root := t.TempDir()
	dir := filepath.Join(root, "class", "student")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	gb := gradeInto(t, root, lab, []grade.Submission{{Student: "student", Dir: dir}}, 2*time.Minute)

	sub, _ := gb.Submission("student")
	require.NotNil(t, sub)
	require.Equal(t, report.OutcomeGraded, sub.Outcome, sub.Message)
	assert.Contains(t, sub.Notes, "verified a second time: the first verification could not decide tasks 1.1, 1.2")
	once, _ := sub.Task("1.1")
	assert.InDelta(t, 40, once.Score, 0.001, "decided by the second run: %+v", once)
	always, _ := sub.Task("1.2")
	assert.Zero(t, always.Score)
	assert.Equal(t, report.Error, always.Status)
	assert.InDelta(t, 40, sub.Score, 0.001)
}
