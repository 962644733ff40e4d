package grade_test

import (
	"context"
	"encoding/json"
	"fmt"
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

// boxDiesEnvVar makes the boxes of TestGraderFailureIsRetriedOnce die
// before they grade, as a box whose disk filled would: "always", or
// "once:FILE" (the first box creates FILE and dies, the next grades), or
// "once-midway:FILE" (the same, the first leaving its cluster's state
// half-written, as a box that died while starting it would).
const boxDiesEnvVar = "LABCTL_TEST_BOX_DIES"

// maybeDieAsABox is called first thing in a box (TestMain).
func maybeDieAsABox() {
	if os.Getenv(grade.BoxEnvVar) != "1" {
		return
	}
	mode := os.Getenv(boxDiesEnvVar)
	marker, once := strings.CutPrefix(mode, "once:")
	midway, halfway := strings.CutPrefix(mode, "once-midway:")
	switch {
	case mode == "always", once && markFirst(marker):
	case halfway && markFirst(midway):
		var job struct {
			Dir string `json:"dir"`
		}
		if json.NewDecoder(os.Stdin).Decode(&job) != nil || job.Dir == "" {
			os.Exit(2)
		}
		state := filepath.Join(job.Dir, "clusters", "grade")
		_ = os.MkdirAll(state, 0o755)
		_ = os.WriteFile(filepath.Join(state, "state.json"), []byte(`{"name": "gra`), 0o600)
	default:
		return
	}
	fmt.Fprintln(os.Stderr, "labctl grade box: no space left on device (the test's own failure)")
	os.Exit(3)
}

// markFirst creates path and says whether this call did.
func markFirst(path string) bool {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false
	}
	return f.Close() == nil
}

// TestGraderFailureIsRetriedOnce: a box that fails on the grader's side is
// graded once more, and the second grade stands; one that fails again is
// the grader's error, never the student's score: the gradebook has no
// grade for it, not a zero.
func TestGraderFailureIsRetriedOnce(t *testing.T) {
	needBox(t, "starts a cluster per submission")
	lab := loadLab(t, "lab-1.4")
	crd, err := os.ReadFile(filepath.Join(repoRoot, "internal", "reference", "website", "website-crd.yaml"))
	require.NoError(t, err)

	for _, tc := range []struct{ name, dies string }{
		{"once", "once:" + filepath.Join(t.TempDir(), "died")},
		// The second attempt starts a fresh cluster, not the first's.
		{"once-midway", "once-midway:" + filepath.Join(t.TempDir(), "died")},
		{"always", "always"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(boxDiesEnvVar, tc.dies)
			root := t.TempDir()
			dir := filepath.Join(root, "class", "student")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "website-crd.yaml"), crd, 0o644))
			gb, err := gradeOne(t, root, lab, grade.Submission{Student: "student", Dir: dir})
			if tc.dies == "always" {
				require.Error(t, err, "a submission that could not be graded fails the run, so that the instructor grades it again")
			} else {
				require.NoError(t, err)
			}
			sub, _ := gb.Submission("student")
			require.NotNil(t, sub)
			csv := readFile(t, root, "out", "gradebook.csv")
			if tc.dies == "always" {
				assert.Equal(t, report.OutcomeError, sub.Outcome)
				assert.Contains(t, sub.Message, "the grader failed (not the submission)")
				assert.Contains(t, sub.Message, "no space left on device")
				assert.Contains(t, csv, "\nstudent,,100,"+strings.Repeat(",", len(lab.Tasks)-1)+"\n", "no grade, not a zero:\n%s", csv)
				return
			}
			assert.Equal(t, report.OutcomeGraded, sub.Outcome, sub.Message)
			assert.InDelta(t, 100, sub.Score, 0.001)
			assert.Contains(t, strings.Join(sub.Notes, "\n"), "graded a second time: the first attempt failed on the grader's side (its box ended early: labctl grade box: no space left on device")
			assert.Contains(t, csv, "\nstudent,100,100,")
		})
	}
}

// gradeOne grades sub in a work directory under root and checks that
// nothing is left running.
func gradeOne(t *testing.T, root string, lab *labs.Lab, sub grade.Submission) (*report.Gradebook, error) {
	t.Helper()
	work := filepath.Join(root, "work")
	require.NoError(t, os.MkdirAll(work, 0o755))
	s, _, _ := iostreams.Test(false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gb, err := grade.Run(ctx, grade.Options{
		Lab: lab, Submissions: []grade.Submission{sub}, Timeout: 2 * time.Minute, OutDir: filepath.Join(root, "out"),
		Streams: s, Binaries: binaries, WorkDir: work, Version: "v-test",
	})
	requireNothingRunning(t, work)
	require.NotNil(t, gb, "a gradebook is written even when a submission could not be graded")
	return gb, err
}
