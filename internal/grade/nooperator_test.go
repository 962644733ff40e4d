package grade_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// TestGradeLabWithoutOperator grades lab 1.4, whose submission is a CRD
// file and no kubebuilder project: nothing is built or run, the checks
// apply the student's website-crd.yaml to the submission's own cluster.
func TestGradeLabWithoutOperator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster per submission")
	}
	lab := loadLab(t, "lab-1.4")
	root := t.TempDir()
	crd, err := os.ReadFile(filepath.Join(repoRoot, "internal", "reference", "website", "website-crd.yaml"))
	require.NoError(t, err)
	var subs []grade.Submission
	for student, content := range map[string][]byte{
		"reference": crd,
		// The mutant of the honesty suite, by hand: no url pattern.
		"no-pattern": []byte(strings.Replace(string(crd), "pattern: '^https?://'", "", 1)),
	} {
		dir := filepath.Join(root, "class", student)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "website-crd.yaml"), content, 0o644))
		subs = append(subs, grade.Submission{Student: student, Dir: dir})
	}
	gb := gradeInto(t, root, lab, subs, 2*time.Minute)
	byStudent := map[string]*report.GradedSubmission{}
	for _, sub := range gb.Submissions {
		byStudent[sub.Student] = sub
	}
	require.Equal(t, report.OutcomeGraded, byStudent["reference"].Outcome, byStudent["reference"].Message)
	assert.InDelta(t, 100, byStudent["reference"].Score, 0.001)
	require.Equal(t, report.OutcomeGraded, byStudent["no-pattern"].Outcome, byStudent["no-pattern"].Message)
	for _, task := range []string{"1.1", "3.2"} {
		ts, _ := byStudent["no-pattern"].Task(task)
		assert.Zero(t, ts.Score, "task %s", task)
	}
	assert.InDelta(t, 100-20-8, byStudent["no-pattern"].Score, 0.001)
}

// gradeInto grades subs (two at a time) in a work directory under root,
// checks that nothing is left running, and returns the gradebook.
func gradeInto(t *testing.T, root string, lab *labs.Lab, subs []grade.Submission, timeout time.Duration) *report.Gradebook {
	t.Helper()
	work := filepath.Join(root, "work")
	require.NoError(t, os.MkdirAll(work, 0o755))
	s, _, stderr := iostreams.Test(false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout+time.Minute)
	defer cancel()
	gb, err := grade.Run(ctx, grade.Options{
		Lab: lab, Submissions: subs, Jobs: 2, Timeout: timeout, OutDir: filepath.Join(root, "out"),
		Streams: s, Binaries: binaries, WorkDir: work, Version: "v-test",
	})
	require.NoError(t, err, stderr.String())
	requireNothingRunning(t, work)
	return gb
}
