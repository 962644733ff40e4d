//go:build unix

package honesty_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/report"
)

// stabilityRuns are the submissions `make stability` grades again and
// again: the reference, course variants (the course's own code shapes)
// and racy operators (no-conflict-retry: its lost update depends on
// timing unless the check provokes the conflict; stale-reread-backup: the
// course's Backup controller, whose Backup stays InProgress in some runs,
// course bug B32).
var stabilityRuns = []struct{ name, patch, lab string }{
	{"reference", "", "lab-4.3"},
	{"reference", "", "lab-8.2"},
	{"course/secret-map-func", "testdata/course/secret-map-func.patch", "lab-4.3"},
	{"course/polling-simulated-backup", "testdata/course/polling-simulated-backup.patch", "lab-8.2"},
	{"racy/no-conflict-retry", "testdata/mutants/no-conflict-retry.patch", "lab-3.4"},
	{"racy/course/stale-reread-backup", "testdata/course/stale-reread-backup.patch", "lab-8.2"},
	// A Backup controller that writes over the status labctl set (the
	// premise rule), and an operator that flaps between phases.
	{"course/backup-status-from-jobs", "testdata/course/backup-status-from-jobs.patch", "lab-8.2"},
	{"racy/ready-before-replicas", "testdata/mutants/ready-before-replicas.patch", "lab-4.4"},
	// Metrics scraped and Events listed; the students' own tests run
	// against labctl's mutants, and one mutant that survives them.
	{"reference", "", "lab-6.4"},
	{"course/course-observability", "testdata/course/course-observability.patch", "lab-6.4"},
	{"course/course-unit-tests", "testdata/course/course-unit-tests.patch", "lab-6.2"},
	{"test-phase-without-ready", "testdata/mutants/test-phase-without-ready.patch", "lab-6.2"},
	// The course's scaffold tests fail through the course's mistake,
	// which warns: every run must say so alike.
	{"course/course-scaffold-tests", "testdata/course/course-scaffold-tests.patch", "lab-6.1"},
	// Integration tests against the deployed operator and its mutants:
	// a caught mutant is told by a time limit, which load must not move;
	// the course's own tests warn twice.
	{"course/course-integration-tests", "testdata/course/course-integration-tests.patch", "lab-6.3"},
	{"integration-scale-not-awaited", "testdata/mutants/integration-scale-not-awaited.patch", "lab-6.3"},
}

// TestStability grades each submission of stabilityRuns N times on a quiet
// machine and N times under load (two `yes >/dev/null`), prints the
// scores and fails if any differ: a verdict is a measurement. It takes
// minutes per submission, so it runs only when asked:
//
//	LABCTL_STABILITY=5 go test ./internal/checks/honesty/ -run TestStability -v
//
// (make stability). LABCTL_STABILITY_ONLY=lab-4.3 keeps the runs whose
// name or lab contains it.
func TestStability(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LABCTL_STABILITY"))
	if n <= 0 || testing.Short() {
		t.Skip("set LABCTL_STABILITY=<grades per condition> (make stability)")
	}
	only := os.Getenv("LABCTL_STABILITY_ONLY")
	var table []string
	for _, run := range stabilityRuns {
		if only != "" && !strings.Contains(run.name+" "+run.lab, only) {
			continue
		}
		t.Run(run.name+"/"+run.lab, func(t *testing.T) {
			dir := copyOperator(t, run.patch)
			studentCommands(t, run.lab, dir)
			op := deployIfOperator(t, env, project{patch: run.patch, operatorless: operatorless(run.lab)}, dir)
			scores := map[string][]int{}
			struck := map[string]int{}
			firstStruck := ""
			firstFailed := ""
			for _, cond := range []string{"quiet", "loaded"} {
				stop := func() {}
				if cond == "loaded" {
					stop = burnCPU(t, 2)
				}
				for range n {
					rep := verify(t, run.lab, op, dir, judgedTasks(t, run.lab)...)
					scores[cond] = append(scores[cond], rep.Summary.Points)
					if msg := struckBug(rep); msg != "" {
						struck[cond]++
						if firstStruck == "" {
							firstStruck = msg
							t.Logf("a course bug's race struck: %s", msg)
						}
					}
					failed := fmt.Sprint(rep.FailedTasks())
					if firstFailed == "" {
						firstFailed = failed
					} else if failed != firstFailed {
						t.Logf("%s run %d failed tasks %s, the first run %s:\n%s", cond, len(scores[cond]), failed, firstFailed, render(rep))
					}
				}
				stop()
			}
			line := fmt.Sprintf("%-34s %-8s quiet %v loaded %v; a course bug's race struck in %d+%d of %d+%d", run.name, run.lab,
				scores["quiet"], scores["loaded"], struck["quiet"], struck["loaded"], n, n)
			table = append(table, line)
			t.Log(line)
			all := append(append([]int(nil), scores["quiet"]...), scores["loaded"]...)
			for _, s := range all {
				require.Equal(t, all[0], s, "the same submission must get the same score: %s", line)
			}
		})
	}
	t.Log("stability (points per grade):\n" + strings.Join(table, "\n"))
}

// struckBug is the first check of rep that reports a course bug's race
// (labs.Stuck) as a warning, with its message; "" when none did.
func struckBug(rep *report.Report) string {
	for _, task := range rep.Tasks {
		for _, c := range task.Checks {
			if c.Status == report.Warn && strings.Contains(c.Message, "(course bug ") {
				return c.ID + ": " + c.Message
			}
		}
	}
	return ""
}

// burnCPU starts k busy processes (yes >/dev/null) and returns what stops
// them (by their own pids). They die with the test binary too, even when
// `go test -timeout` kills it before any cleanup runs.
func burnCPU(t *testing.T, k int) func() {
	t.Helper()
	yes, err := exec.LookPath("yes")
	require.NoError(t, err)
	var cmds []*exec.Cmd
	for range k {
		cmd := exec.Command(yes)
		cmd.Stdout = nil // the null device
		tieToTest(cmd)
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}
