package grade_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/report"
)

// TestGradeOwnTestsInTheBox grades lab 6.2, whose deliverable is the
// students' own tests: labctl runs them, and runs them against mutants of
// each student's controller, as the submission's box user. The course's
// tests get full marks; a suite that cheats (specs that call Reconcile
// and assert nothing, and one that remembers its first run's environment
// and fails in any run that differs, so that every mutant looks caught)
// gets no task that a mutant decides.
func TestGradeOwnTestsInTheBox(t *testing.T) {
	needBox(t, "runs two envtest suites, ten times each")
	const mutants = "internal/checks/honesty/testdata"
	lab := loadLab(t, "lab-6.2")
	root := t.TempDir()
	subs := materialize(t, filepath.Join(root, "class"), []fixture{
		{Student: "course", Patches: []string{mutants + "/course/course-unit-tests.patch"}},
		{Student: "cheat", Patches: []string{mutants + "/mutants/test-fails-unlike-first-run.patch"}},
	}, true)
	gb := gradeInto(t, root, lab, subs, 12*time.Minute)
	course, cheat := graded(t, gb, "course"), graded(t, gb, "cheat")
	assert.InDelta(t, 100, course.Score, 0.001, "the course's own tests: %+v\n%s", course.Tasks, reportJSON(course.Report))
	for _, task := range []string{"1.1", "2.1", "3.1", "3.2", "4.1"} {
		ts, _ := cheat.Task(task)
		assert.Zero(t, ts.Score, "the cheat earns nothing for task %s", task)
	}
}

// graded is the student's submission in gb, which must have been graded.
func graded(t *testing.T, gb *report.Gradebook, student string) *report.GradedSubmission {
	t.Helper()
	sub, _ := gb.Submission(student)
	require.NotNil(t, sub, "no submission %s in the gradebook", student)
	require.Equal(t, report.OutcomeGraded, sub.Outcome, "%s: %s", student, sub.Message)
	return sub
}

// reportJSON is the verification, for a failure's message.
func reportJSON(r *report.Report) string {
	raw, _ := json.MarshalIndent(r, "", "  ")
	return string(raw)
}

// TestGradeLab61InTheBox grades lab 6.1 as an instructor would: the
// students' tests run in each submission's box, the coverage.out they
// committed is read, and the tools they installed on their own machines
// (Ginkgo, setup-envtest, Delve) are not graded: the grader's machine is
// not theirs, so those tasks are not in the total either. The
// course's scaffold tests fail through the course's own mistake (the
// empty spec that lab 3.2's validation rejects): that costs nothing.
func TestGradeLab61InTheBox(t *testing.T) {
	needBox(t, "runs two envtest suites")
	const course = "internal/checks/honesty/testdata/course/course-scaffold-tests.patch"
	lab := loadLab(t, "lab-6.1")
	root := t.TempDir()
	subs := materialize(t, filepath.Join(root, "class"), []fixture{
		{Student: "course", Patches: []string{course}},
		{Student: "no-profile", Patches: []string{course}},
	}, true)
	// What go test -coverprofile=coverage.out ./internal/controller/...
	// writes, in short.
	profile := "mode: set\ngithub.com/example/postgres-operator/internal/controller/database_controller.go:60.1,62.2 2 1\n" +
		"github.com/example/postgres-operator/internal/controller/database_controller.go:63.1,65.2 3 0\n"
	require.NoError(t, os.WriteFile(filepath.Join(subs[0].Dir, "coverage.out"), []byte(profile), 0o644))
	gb := gradeInto(t, root, lab, subs, 10*time.Minute)
	withProfile, without := graded(t, gb, "course"), graded(t, gb, "no-profile")
	assert.InDelta(t, 70, gb.MaxPoints, 0.001, "tasks 4.1 and 4.2; not the tools")
	for _, task := range gb.Tasks {
		assert.NotContains(t, []string{"1.1", "1.2", "1.3"}, task.ID, "a tool on the student's machine is not a column")
	}
	assert.InDelta(t, gb.MaxPoints, withProfile.Score, 0.001, "the course's scaffold tests and a profile: %+v\n%s", withProfile.Tasks, reportJSON(withProfile.Report))
	ts, _ := without.Task("4.2")
	assert.Zero(t, ts.Score, "no coverage.out earns nothing for task 4.2")
	ts, _ = without.Task("4.1")
	assert.NotZero(t, ts.Score, "the tests ran as well as the other's")
}

// Lab 6.3 in the box: the integration tests run in each submission's box
// against its own cluster and operator, as a ServiceAccount of their own
// (a kubeconfig the box's user can read), and again against mutants of
// that operator. The reference's tests catch every mutant; tests that
// never wait for the scaling lose task 2.1 and nothing else.
func TestGradeLab63InTheBox(t *testing.T) {
	needBox(t, "deploys two operators and runs their integration tests")
	lab := loadLab(t, "lab-6.3")
	root := t.TempDir()
	subs := materialize(t, filepath.Join(root, "class"), []fixture{
		{Student: "reference"},
		{Student: "scale-not-awaited", Patches: []string{"internal/checks/honesty/testdata/mutants/integration-scale-not-awaited.patch"}},
	}, true)
	gb := gradeInto(t, root, lab, subs, 15*time.Minute)
	ref, weak := graded(t, gb, "reference"), graded(t, gb, "scale-not-awaited")
	assert.InDelta(t, 100, ref.Score, 0.001, "the reference: %+v\n%s", ref.Tasks, reportJSON(ref.Report))
	assert.InDelta(t, 60, weak.Score, 0.001, "tests that never wait for the scaling: %+v\n%s", weak.Tasks, reportJSON(weak.Report))
	ts, _ := weak.Task("2.1")
	assert.Zero(t, ts.Score)
}
