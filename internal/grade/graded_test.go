package grade

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// A warning on a step marked graded (a Backup Completed without a backup
// Job) passes verify but costs the task in grading.
func TestGradedWarningWithholdsTheTask(t *testing.T) {
	lab := &labs.Lab{
		Tasks: []labs.Task{{ID: "4.2", Points: 10}},
		Scenarios: []labs.Scenario{{Steps: []labs.Step{
			{ID: "completed", Tasks: []string{"4.2"}},
			{ID: "really-ran", Tasks: []string{"4.2"}, Severity: "warn", Graded: true},
		}}},
	}
	rep := &report.Report{Tasks: []*report.Task{{ID: "4.2", Checks: []*report.Check{
		{ID: "completed", Status: report.Pass},
		{ID: "really-ran", Title: "a backup Job ran", Status: report.Warn},
	}}}}
	tasks, total := Score(lab, rep, CreditTasks)
	assert.Zero(t, total)
	assert.Equal(t, report.Fail, tasks[0].Status)
	assert.Contains(t, tasks[0].Reason, "a backup Job ran")

	_, total = Score(lab, rep, CreditChecks)
	assert.Equal(t, 5.0, total, "half the checks")

	rep.Tasks[0].Checks[1].Status = report.Pass
	_, total = Score(lab, rep, CreditTasks)
	assert.Equal(t, 10.0, total)
}
