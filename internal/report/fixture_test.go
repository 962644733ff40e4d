package report_test

import (
	"fmt"
	"time"

	"github.com/labctl/labctl/internal/report"
)

// The fixture class: a lab of five tasks (one hidden) graded with partial
// credit, and students for every outcome. Two of them are named with
// markup, and their evidence carries script, as a hostile submission's
// could.
const (
	evilAlert = `<img src=x onerror=alert(1)>`
	evilTitle = `<img src=x onerror="document.title='pwned'">`
	// evilScript is in a log line, a message and an object: text that
	// must stay text wherever a submission's output is shown.
	evilScript = `<script>document.body.dataset.pwned='1'</script>`
)

var fixtureTime = time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)

type fixtureCheck struct{ id, title string }

type fixtureTask struct {
	report.GradeTask
	hint   string
	gate   string // the check whose failure leaves the task nothing
	checks []fixtureCheck
}

var fixtureTasks = []fixtureTask{
	{GradeTask: report.GradeTask{ID: "1.1", Title: "Scaffold the Backup API", Points: 5}, checks: []fixtureCheck{
		{"scaffold", "PROJECT lists the Backup kind"}, {"crd-installed", "The Backup CRD is installed"}}},
	{GradeTask: report.GradeTask{ID: "2.1", Title: "A Backup waits for its Database", Points: 10}, gate: "waits-ready",
		hint: "Requeue while the Database is not Ready; do not create the Job yet.",
		checks: []fixtureCheck{
			{"waits-ready", "The Backup waits for Database Ready"}, {"no-job-early", "No backup Job before the Database is Ready"}}},
	{GradeTask: report.GradeTask{ID: "3.1", Title: "The BackupReady condition", Points: 10},
		hint:   "Set the condition with meta.SetStatusCondition and update the status subresource.",
		checks: []fixtureCheck{{"backup-ready", "The Backup has BackupReady=True"}}},
	{GradeTask: report.GradeTask{ID: "4.2", Title: "The backup Job runs to completion", Points: 15},
		hint: "Own the Job (controllerutil.SetControllerReference) and watch Jobs with Owns().",
		checks: []fixtureCheck{
			{"job-created", "A backup Job is created"}, {"job-complete", "The Backup completes when its Job does"}, {"owner-ref", "The Job is owned by the Backup"}}},
	{GradeTask: report.GradeTask{ID: "9.9", Title: "Backups survive a manager restart", Points: 5, Hidden: true},
		checks: []fixtureCheck{{"restart", "A Backup in progress completes after a restart"}}},
}

// failure is what a check found when it did not pass.
type failure struct {
	status            report.Result // default Fail
	message           string
	expected, observe string
	logs              []string
	object            string
}

// fixtureGradebook is an empty gradebook of the fixture lab.
func fixtureGradebook() *report.Gradebook {
	gb := &report.Gradebook{Lab: "lab-8.2", Title: "Composing Operators", Lang: "en", Credit: "checks",
		Run: &report.GradeRun{Version: "v0.9.0-test", Started: fixtureTime, Jobs: 2,
			Timeout: report.Duration(10 * time.Minute), CPU: report.Duration(90 * time.Second), MemoryBytes: 1 << 30}}
	for _, t := range fixtureTasks {
		gb.Tasks = append(gb.Tasks, t.GradeTask)
		gb.MaxPoints += float64(t.Points)
	}
	return gb
}

// gradedStudent verifies a student whose checks all pass but the failed
// ones, and scores it with partial credit (nothing for a failed gate).
func gradedStudent(gb *report.Gradebook, student string, at time.Duration, failed map[string]failure) *report.GradedSubmission {
	rep := &report.Report{Lab: gb.Lab, Title: gb.Title, Lang: gb.Lang, Started: fixtureTime.Add(at), Duration: report.Duration(95 * time.Second)}
	sub := &report.GradedSubmission{Student: student, Source: "/class/" + student, Graded: fixtureTime.Add(at),
		Duration: report.Duration(2*time.Minute + at%time.Minute), Outcome: report.OutcomeGraded, MaxPoints: gb.MaxPoints, Report: rep}
	for _, ft := range fixtureTasks {
		rt := &report.Task{ID: ft.ID, Title: ft.Title, Hint: ft.hint, Points: ft.Points, Hidden: ft.Hidden}
		ts := report.TaskScore{ID: ft.ID, Points: ft.Points, Checks: len(ft.checks)}
		gateFailed := false
		for _, fc := range ft.checks {
			c := &report.CheckResult{ID: fc.id, Title: fc.title, Tasks: []string{ft.ID}, Status: report.Pass, Duration: report.Duration(1200 * time.Millisecond)}
			if f, bad := failed[fc.id]; bad {
				c.Status = report.Fail
				if f.status != "" {
					c.Status = f.status
				}
				c.Message, c.Expected, c.Observed, c.Logs, c.Object = f.message, f.expected, f.observe, f.logs, f.object
				gateFailed = gateFailed || fc.id == ft.gate
			} else {
				ts.Passed++
			}
			rt.Checks = append(rt.Checks, c)
		}
		rep.Tasks = append(rep.Tasks, rt)
		ts.Status = report.TaskStatus(rt.Checks)
		if gateFailed {
			ts.Reason = fmt.Sprintf("No points: %q did not pass, and the task's other checks depend on it.", ft.checks[0].title)
		} else {
			ts.Score = report.RoundPoints(float64(ft.Points) * float64(ts.Passed) / float64(ts.Checks))
		}
		sub.Score += ts.Score
		sub.Tasks = append(sub.Tasks, ts)
	}
	rep.Finish()
	sub.Score = report.RoundPoints(sub.Score)
	return sub
}

// ungradedStudent is a submission no check ran against.
func ungradedStudent(gb *report.Gradebook, student string, at time.Duration, outcome report.GradeOutcome, message string, status report.Result) *report.GradedSubmission {
	sub := &report.GradedSubmission{Student: student, Source: "/class/" + student, Graded: fixtureTime.Add(at),
		Duration: report.Duration(40 * time.Second), Outcome: outcome, Message: message, MaxPoints: gb.MaxPoints}
	for _, t := range fixtureTasks {
		sub.Tasks = append(sub.Tasks, report.TaskScore{ID: t.ID, Points: t.Points, Status: status})
	}
	return sub
}

var (
	noCondition = failure{message: "no BackupReady condition on the Backup after 30s", expected: "BackupReady=True", observe: "conditions: []",
		object: "apiVersion: backup.example.com/v1\nkind: Backup\nstatus:\n  phase: Completed\n"}
	jobEarly = failure{message: "a backup Job existed while the Database was not Ready", expected: "no Job until Ready", observe: "Job backup-db-1 created at +0.4s",
		logs: []string{"INFO\tcreating backup Job\t{\"backup\": \"db-1\"}"}}
	notOwned    = failure{message: "the Job has no controller owner reference", expected: "ownerReferences[controller=true].kind=Backup", observe: "ownerReferences: []"}
	neverDone   = failure{message: "the Backup stayed Running after its Job completed", expected: "phase=Completed", observe: "phase=Running"}
	restartLost = failure{message: "the Backup never completed after the manager restarted", expected: "phase=Completed", observe: "phase=Running"}
)

// fixtureClass is the class of the golden test and the browser test.
func fixtureClass() *report.Gradebook {
	gb := fixtureGradebook()
	m := time.Minute
	gb.Put(gradedStudent(gb, "alice", 0, nil))
	gb.Put(gradedStudent(gb, "bob", 2*m, map[string]failure{"backup-ready": noCondition, "owner-ref": notOwned}))
	gb.Put(gradedStudent(gb, "chen", 4*m, map[string]failure{"backup-ready": noCondition, "job-complete": neverDone, "restart": restartLost}))
	gb.Put(gradedStudent(gb, "dana", 6*m, map[string]failure{"owner-ref": notOwned}))
	gb.Put(gradedStudent(gb, "emil", 8*m, map[string]failure{"waits-ready": jobEarly, "no-job-early": jobEarly, "backup-ready": noCondition}))
	gb.Put(gradedStudent(gb, "farida", 10*m, map[string]failure{"restart": restartLost}))
	gb.Put(gradedStudent(gb, evilAlert, 12*m, map[string]failure{
		"backup-ready": {message: "condition reason was " + evilScript, expected: "BackupReady=True", observe: `reason: "` + evilAlert + `"`,
			logs: []string{evilScript, "ERROR\treconcile\t" + evilTitle}, object: "metadata:\n  name: " + evilScript + "\n"},
		"owner-ref": notOwned,
	}))
	gb.Put(gradedStudent(gb, evilTitle, 14*m, map[string]failure{"job-created": {message: evilTitle, observe: evilScript}, "job-complete": neverDone, "owner-ref": notOwned}))

	grace := gradedStudent(gb, "grace", 16*m, map[string]failure{
		"waits-ready": {status: report.Error, message: "the manager is not running"}, "backup-ready": noCondition,
		"job-created": {message: "no Job appeared within 30s"}, "job-complete": neverDone, "owner-ref": notOwned, "restart": restartLost})
	grace.Message = "the manager did not become ready (exit status 1): ERROR setup unable to create controller {\"controller\": \"Backup\"}"
	gb.Put(grace)

	timeout := gradedStudent(gb, "hugo", 18*m, map[string]failure{
		"job-complete": {status: report.Error, message: "stopped at the time limit"}, "owner-ref": {status: report.Error, message: "stopped at the time limit"},
		"restart": {status: report.Error, message: "stopped at the time limit"}})
	timeout.Outcome = report.OutcomeTimeout
	timeout.Message = "the time limit of 10m0s ended grading while verifying"
	gb.Put(timeout)

	build := ungradedStudent(gb, "ivan", 20*m, report.OutcomeBuildFailed,
		"the project does not build: internal/controller/backup_controller.go:47:29: cannot use time.Now() (value of struct type time.Time) as metav1.Time value", report.Fail)
	build.BuildErrors = []string{"# github.com/example/postgres-operator/internal/controller",
		"internal/controller/backup_controller.go:47:29: cannot use time.Now() (value of struct type time.Time) as metav1.Time value in assignment",
		"internal/controller/backup_controller.go:52:3: undefined: " + evilScript}
	gb.Put(build)
	gb.Put(ungradedStudent(gb, "jana", 22*m, report.OutcomeDeployFailed,
		"cannot render config/default: accumulating resources: 'rbac/role_binding.yaml': no such file", report.Fail))
	gb.Put(ungradedStudent(gb, "kofi", 24*m, report.OutcomeError,
		"its cluster did not start: kube-apiserver exited: listen tcp 127.0.0.1:6443: bind: address already in use", report.Error))
	return gb
}

// bigClass is n students with a spread of results, for the benchmark.
func bigClass(n int) *report.Gradebook {
	gb := fixtureGradebook()
	fails := []map[string]failure{
		nil,
		{"backup-ready": noCondition},
		{"owner-ref": notOwned, "restart": restartLost},
		{"waits-ready": jobEarly, "no-job-early": jobEarly},
		{"job-complete": neverDone, "backup-ready": noCondition, "owner-ref": notOwned},
		{"restart": restartLost},
		{"crd-installed": {message: "no CRD backups.backup.example.com"}, "backup-ready": noCondition},
	}
	for i := range n {
		student := fmt.Sprintf("student-%03d", i)
		at := time.Duration(i) * 30 * time.Second
		switch {
		case i%23 == 7:
			gb.Put(ungradedStudent(gb, student, at, report.OutcomeBuildFailed, "the project does not build: main.go:3:2: undefined: x", report.Fail))
		case i%41 == 9:
			gb.Put(ungradedStudent(gb, student, at, report.OutcomeError, "its cluster did not start", report.Error))
		default:
			gb.Put(gradedStudent(gb, student, at, fails[(i*5+i/7)%len(fails)]))
		}
	}
	return gb
}
