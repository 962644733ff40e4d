package grade

import (
	"fmt"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// Columns are the gradebook's tasks: every task of the lab, in its order.
func Columns(lab *labs.Lab, lang string) []report.GradeTask {
	var out []report.GradeTask
	for _, t := range lab.Tasks {
		out = append(out, report.GradeTask{ID: t.ID, Title: t.Title.In(lang), Points: t.Points, Hidden: t.Hidden})
	}
	return out
}

// Credit is how a task's points are earned from its checks.
type Credit string

// Credit policies.
const (
	// CreditTasks (the default): credit task by task; a task earns its
	// points when verify passes it (every check passed, warnings
	// included), else none. The lab's score is the sum, so a submission
	// gets partial credit for the tasks it solved. A task verdict is what
	// verify's honesty suite guarantees, so re-grading the same code gives
	// the same score, and checks that pass trivially (nothing happened
	// because the operator is down) earn nothing on their own.
	CreditTasks Credit = "tasks"
	// CreditChecks: partial credit inside a task, its points times the
	// share of its checks that passed; nothing when one of its gate checks
	// failed. Finer, but a check-level result can vary between runs where
	// the task verdict does not (e.g. which of two timing checks catches a
	// race), and absence checks pass for an operator that does nothing.
	CreditChecks Credit = "checks"
)

// Credits lists the policies (for --credit).
var Credits = []Credit{CreditTasks, CreditChecks}

// Score credits each task of the lab from a verification report.
//
// With CreditChecks a task earns its points times the share of its checks
// that passed (pass or warn). A task whose gate check did not pass earns
// nothing: a gate is what the rest of the scenario stands on (the
// Database is Ready, the Backup completed), so the checks after it prove
// nothing without it — which is also what keeps an operator that only
// writes a status from collecting points for it. With CreditTasks a task
// earns all its points when verify passes it (every check passed or was
// skipped, at least one passed, no graded warning), else none. A task with no
// checks in the report (or no report) earns nothing.
func Score(lab *labs.Lab, rep *report.Report, credit Credit) (tasks []report.TaskScore, total float64) {
	gates, graded := map[string]bool{}, map[string]bool{}
	for _, sc := range lab.Scenarios {
		for _, st := range sc.Steps {
			if st.Gate && st.ID != "" {
				gates[st.ID] = true
			}
			if st.Graded && st.ID != "" {
				graded[st.ID] = true
			}
		}
	}
	byID := map[string]*report.Task{}
	if rep != nil {
		for _, t := range rep.Tasks {
			byID[t.ID] = t
		}
	}
	for _, lt := range lab.Tasks {
		ts := report.TaskScore{ID: lt.ID, Points: lt.Points, Status: report.Skipped}
		if rt := byID[lt.ID]; rt != nil {
			ts.Status = report.TaskStatus(rt.Checks)
			ts.Checks = len(rt.Checks)
			var gateFailed *report.Check
			var gradedWarn *report.Check
			for _, c := range rt.Checks {
				if graded[c.ID] && c.Status == report.Warn {
					// verify only warns (students may have followed the
					// course's simulated code); grading requires it.
					if gradedWarn == nil {
						gradedWarn = c
					}
					continue
				}
				if c.Status.Passed() {
					ts.Passed++
				} else if gates[c.ID] && gateFailed == nil {
					gateFailed = c
				}
			}
			if gradedWarn != nil && ts.Status.Passed() {
				ts.Status = report.Fail
			}
			switch {
			case ts.Checks == 0:
			case credit == CreditTasks:
				// As verify decides the task: a skipped check (it could
				// not be provoked here) costs nothing when the task's
				// other checks passed; a task with only skipped checks is
				// skipped and earns nothing.
				if ts.Status.Passed() {
					ts.Score = float64(lt.Points)
				} else if gradedWarn != nil {
					ts.Reason = fmt.Sprintf("No points: %q is required for grading.", gradedWarn.Title)
				}
			case gradedWarn != nil && credit == CreditChecks:
				ts.Score = report.RoundPoints(float64(lt.Points) * float64(ts.Passed) / float64(ts.Checks))
				ts.Reason = fmt.Sprintf("Points withheld for %q: graders require it.", gradedWarn.Title)
			case gateFailed != nil:
				ts.Reason = fmt.Sprintf("No points: %q did not pass, and the task's other checks depend on it.", gateFailed.Title)
			default:
				ts.Score = report.RoundPoints(float64(lt.Points) * float64(ts.Passed) / float64(ts.Checks))
			}
		}
		total += ts.Score
		tasks = append(tasks, ts)
	}
	return tasks, report.RoundPoints(total)
}

// zeroScores is the score of a submission no check ran against.
func zeroScores(lab *labs.Lab, status report.Status) []report.TaskScore {
	var out []report.TaskScore
	for _, t := range lab.Tasks {
		out = append(out, report.TaskScore{ID: t.ID, Points: t.Points, Status: status})
	}
	return out
}
