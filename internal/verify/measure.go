package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/report"
)

// Measure runs a lab's checks (run) for a grade. A verification with
// checks that could not decide (report.Undecided: an API call failed
// them, a tool broke) measured nothing of those tasks, and charging them
// would charge the grader's failure to the student: the checks run once
// more, when ctx's deadline leaves room for a second run as long as the
// first and half again, and the second verification stands, whatever it
// decides. note says that it ran and why, or why it could not ("" when
// the first run decided everything).
func Measure(ctx context.Context, run func(context.Context) (*report.Report, error)) (rep *report.Report, note string, err error) {
	start := time.Now()
	rep, err = run(ctx)
	if err != nil || ctx.Err() != nil {
		return rep, "", err
	}
	undecided := rep.Undecided()
	if len(undecided) == 0 {
		return rep, "", nil
	}
	if !roomFor(ctx, time.Since(start)) {
		return rep, fmt.Sprintf("the verification could not decide %s, and the time limit left no room to verify again", tasksOf(undecided)), nil
	}
	again, err := run(ctx)
	return again, fmt.Sprintf("verified a second time: the first verification could not decide %s", tasksOf(undecided)), err
}

// roomFor says whether ctx's deadline leaves room for another run that
// takes as long as one that took d, and half again.
func roomFor(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d+d/2
}

// tasksOf names the tasks of checks (their titles may be hidden from the
// student; task IDs never are).
func tasksOf(checks []*report.CheckResult) string {
	var ids []string
	for _, c := range checks {
		for _, id := range c.Tasks {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 1 {
		return "task " + ids[0]
	}
	return "tasks " + strings.Join(ids, ", ")
}
