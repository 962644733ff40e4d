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
	// points when verify passes it (every check that ran passed,
	// warnings included; skipped checks neither earn nor cost), else none. The lab's score is the sum, so a submission
	// gets partial credit for the tasks it solved. A task verdict is what
	// verify's honesty suite guarantees, so re-grading the same code gives
	// the same score, and checks that pass trivially (nothing happened
	// because the operator is down) earn nothing on their own.
	CreditTasks Credit = "tasks"
	// CreditChecks: partial credit inside a task, its points times the
	// share of its checks that ran and passed; nothing when one of its gate checks
	// failed. Finer, but a check-level result can vary between runs where
	// the task verdict does not (e.g. which of two timing checks catches a
	// race), and absence checks pass for an operator that does nothing.
	CreditChecks Credit = "checks"
)

// Credits lists the policies (for --credit).
var Credits = []Credit{CreditTasks, CreditChecks}

// Score credits each task of the lab from a verification report.
//
// A skipped check (it could not run here, e.g. a conflict that could not
// be provoked against an operator that only patches) neither earns nor
// costs anything: the task is judged on the checks that ran, and its
// status is the one verify gives it (report.TaskStatus), so the points
// and the status always agree. A task whose checks were all skipped earns
// nothing and says so.
//
// With CreditChecks a task earns its points times the share of its checks
// that ran and passed (pass or warn). A task whose gate check did not pass
// earns nothing: a gate is what the rest of the scenario stands on (the
// Database is Ready, the Backup completed), so the checks after it prove
// nothing without it — which is also what keeps an operator that only
// writes a status from collecting points for it. With CreditTasks a task
// earns all its points when it passed, else none. A task with no checks in
// the report (or no report) earns nothing.
func Score(lab *labs.Lab, rep *report.Report, credit Credit) (tasks []report.TaskScore, total float64) {
	gates := map[string]bool{}
	for _, sc := range lab.Scenarios {
		for _, st := range sc.Steps {
			if st.Gate && st.ID != "" {
				gates[st.ID] = true
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
			var gateFailed, firstSkipped, blocked *report.CheckResult
			for _, c := range rt.Checks {
				switch {
				case c.Status == report.Skipped:
					ts.Skipped++
					if firstSkipped == nil {
						firstSkipped = c
					}
					if c.BlockedBy != "" && blocked == nil {
						blocked = c
					}
					continue
				case c.Status.Passed():
					ts.Passed++
				case gates[c.ID] && gateFailed == nil:
					gateFailed = c
				}
				ts.Checks++
			}
			switch {
			case ts.Checks == 0:
				if ts.Skipped > 0 {
					// Say why (e.g. "not run: gate 3.2 … failed"): the
					// points were lost where that gate's task is charged.
					ts.Reason = fmt.Sprintf("No points: none of the task's checks could run here (%s).", firstSkipped.Message)
				}
			case blocked != nil && !ts.Status.Passed():
				// Not judged: a failed gate kept part of its evidence
				// from being taken (see report.TaskStatus).
				ts.Reason = fmt.Sprintf("No points: not judged, %s.", blocked.Message)
			case credit == CreditTasks:
				if ts.Status.Passed() {
					ts.Score = float64(lt.Points)
				}
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
func zeroScores(lab *labs.Lab, status report.Result) []report.TaskScore {
	var out []report.TaskScore
	for _, t := range lab.Tasks {
		out = append(out, report.TaskScore{ID: t.ID, Points: t.Points, Status: status})
	}
	return out
}
