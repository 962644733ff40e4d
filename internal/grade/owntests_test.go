package grade_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/sandbox"
)

// TestGradeOwnTestsInTheBox grades lab 6.2, whose deliverable is the
// students' own tests: labctl runs them, and runs them against mutants of
// each student's controller, as the submission's box user. The course's
// tests get full marks; a suite that cheats (specs that call Reconcile
// and assert nothing, and one that remembers its first run's environment
// and fails in any run that differs, so that every mutant looks caught)
// gets no task that a mutant decides.
func TestGradeOwnTestsInTheBox(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two envtest suites, ten times each")
	}
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip("no sandbox on this machine: " + sup.Reason)
	}
	const mutants = "internal/checks/honesty/testdata"
	lab := loadLab(t, "lab-6.2")
	root := t.TempDir()
	subs := materialize(t, filepath.Join(root, "class"), []fixture{
		{Student: "course", Patches: []string{mutants + "/course/course-unit-tests.patch"}},
		{Student: "cheat", Patches: []string{mutants + "/mutants/test-fails-unlike-first-run.patch"}},
	}, true)
	gb := gradeInto(t, root, lab, subs, 12*time.Minute)
	course, _ := gb.Submission("course")
	cheat, _ := gb.Submission("cheat")
	require.NotNil(t, course)
	require.NotNil(t, cheat)
	require.Equal(t, report.OutcomeGraded, course.Outcome, course.Message)
	assert.InDelta(t, 100, course.Score, 0.001, "the course's own tests: %+v\n%s", course.Tasks, reportJSON(course.Report))
	require.Equal(t, report.OutcomeGraded, cheat.Outcome, cheat.Message)
	for _, task := range []string{"1.1", "2.1", "3.1", "3.2", "4.1"} {
		ts, _ := cheat.Task(task)
		assert.Zero(t, ts.Score, "the cheat earns nothing for task %s", task)
	}
}

// reportJSON is the verification, for a failure's message.
func reportJSON(r *report.Report) string {
	raw, _ := json.MarshalIndent(r, "", "  ")
	return string(raw)
}
