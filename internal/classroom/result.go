// Package classroom plugs labctl into GitHub Classroom, where each
// student's repository is graded by GitHub Actions in its own runner: the
// workflow a template repository runs (`labctl classroom init`) and the
// result GitHub Classroom's autograding reporter reads (`labctl verify -o
// classroom`).
//
// The reporter (classroom-resources/autograding-grading-reporter) takes a
// comma-separated list of runner names in its `runners` input and, for
// each, reads the environment variable <NAME in upper case>_RESULTS: base64
// of a JSON document {version, status, max_score, tests: [{name, status,
// score, max_score, message, ...}]}. Its summary table scores a runner as
// (tests passed ÷ tests) × max_score, so labctl gives it one runner per
// task (TaskRunner), each with that task's points as max_score: every
// total it shows then agrees with the lab's points, however unequal the
// tasks. Verify prints one `<runner>=<base64>` line per task, the verify
// step appends them to $GITHUB_OUTPUT, and the reporter step maps each to
// its variable. Classroom's recorded points are the sum of the tests'
// scores out of the sum of max_score.
package classroom

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// Format is verify's -o value for GitHub Classroom.
const Format = "classroom"

// RunnerID is the id of the workflow's verify step, whose outputs are the
// tasks' results.
const RunnerID = "labctl"

// TaskRunner is the reporter's runner name for a lab task, which is also
// the verify step's output holding its result: "task_" and the task id
// with everything but letters and digits as "_" (task 6.2: task_6_2), a
// name both a step output and an environment variable can have.
func TaskRunner(taskID string) string {
	b := []byte("task_")
	for _, r := range strings.ToLower(taskID) {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			b = append(b, byte(r))
		} else {
			b = append(b, '_')
		}
	}
	return string(b)
}

// ResultsEnv is the variable the reporter reads for a runner.
func ResultsEnv(runner string) string { return strings.ToUpper(runner) + "_RESULTS" }

// Test statuses the reporter knows.
const (
	StatusPass  = "pass"
	StatusFail  = "fail"
	StatusError = "error"
)

// Result is what one grader step hands to the reporter (version 1 of the
// format the classroom-resources graders write).
type Result struct {
	Version  int    `json:"version"`
	Status   string `json:"status"`
	MaxScore int    `json:"max_score"`
	Tests    []Test `json:"tests"`
}

// Test is one task of the lab.
type Test struct {
	Name     string  `json:"name"`
	Status   string  `json:"status"`
	Score    float64 `json:"score"`
	MaxScore int     `json:"max_score"`
	// Message is the task as verify's text report shows it: its checks'
	// evidence and the hint when it did not pass.
	Message string `json:"message"`
	// TestCode is the command that repeats the task's checks; the reporter
	// prints it under a test that did not pass.
	TestCode string `json:"test_code"`
	Filename string `json:"filename"`
	// LineNo is 0: the reporter prints " - line N" for any other value
	// (and "line undefined" when it is missing).
	LineNo        int    `json:"line_no"`
	ExecutionTime string `json:"execution_time"`
}

// NewResult scores a verify report the way `labctl grade` does with the
// same credit ("" is task credit: a task earns its points when verify
// passes it) and makes one test per task of the lab, in the lab's order,
// so the tests' max_score add up to the lab's points. A task the report
// lacks (verify ran with --task) is an error worth nothing.
func NewResult(lab *labs.Lab, rep *report.Report, credit grade.Credit) *Result {
	lang := rep.Lang
	byID := map[string]*report.Task{}
	for _, t := range rep.Tasks {
		byID[t.ID] = t
	}
	if credit == "" {
		credit = grade.CreditTasks
	}
	scores, _ := grade.Score(lab, rep, credit)
	res := &Result{Version: 1, Status: StatusPass, MaxScore: lab.MaxPoints()}
	plain := iostreams.PlainStyles()
	for i, ts := range scores {
		lt := lab.Tasks[i]
		test := Test{
			Name:     lt.ID + " " + report.CleanLine(lt.Title.In(lang)),
			Score:    ts.Score,
			MaxScore: lt.Points,
			TestCode: fmt.Sprintf("labctl verify %s --task %s", lab.ID, lt.ID),
		}
		rt := byID[lt.ID]
		if rt == nil {
			test.Status = StatusError
			test.Message = "not verified in this run"
			res.Tests = append(res.Tests, test)
			continue
		}
		test.Status = testStatus(ts.Status)
		var msg bytes.Buffer
		_ = report.WriteTaskText(&msg, plain, lang, rt, false)
		test.Message = strings.TrimRight(msg.String(), "\n")
		if ts.Reason != "" {
			test.Message += "\n" + ts.Reason
		}
		test.Message = cut(test.Message, MessageBudget/max(len(lab.Tasks), 1))
		var spent time.Duration
		for _, c := range rt.Checks {
			spent += time.Duration(c.Duration)
		}
		test.ExecutionTime = fmt.Sprintf("%.3fs", spent.Seconds())
		res.Tests = append(res.Tests, test)
	}
	res.Status = overall(res.Tests)
	return res
}

// FailedResult is the result of a lab whose checks could not run because
// the operator could not be built or deployed (`labctl up` failed): every
// task failed, worth nothing, with the reason as its message, so the
// student sees why and Classroom records 0 rather than nothing.
func FailedResult(lab *labs.Lab, lang, reason string) *Result {
	res := &Result{Version: 1, Status: StatusFail, MaxScore: lab.MaxPoints()}
	msg := cut(report.Clean(reason), MessageBudget/max(len(lab.Tasks), 1))
	for _, lt := range lab.Tasks {
		res.Tests = append(res.Tests, Test{
			Name:     lt.ID + " " + report.CleanLine(lt.Title.In(lang)),
			Status:   StatusFail,
			MaxScore: lt.Points,
			Message:  msg,
			TestCode: "labctl up --project .",
		})
	}
	return res
}

// overall is a result's status: fail when a test failed, else error when
// one errored, else pass.
func overall(tests []Test) string {
	status := StatusPass
	for _, t := range tests {
		switch {
		case t.Status == StatusFail:
			status = StatusFail
		case t.Status == StatusError && status == StatusPass:
			status = StatusError
		}
	}
	return status
}

// PerTask splits a lab's result into one result per task, keyed by
// TaskRunner in the lab's order: what the reporter's runners read.
func (r *Result) PerTask(lab *labs.Lab) []TaskResult {
	out := make([]TaskResult, 0, len(r.Tests))
	for i, t := range r.Tests {
		if i >= len(lab.Tasks) {
			break
		}
		out = append(out, TaskResult{Runner: TaskRunner(lab.Tasks[i].ID),
			Result: &Result{Version: r.Version, Status: overall([]Test{t}), MaxScore: t.MaxScore, Tests: []Test{t}}})
	}
	return out
}

// TaskResult is one task's result under its runner's name.
type TaskResult struct {
	Runner string
	Result *Result
}

// MessageBudget bounds the tests' messages together, in bytes. The
// reporter gets the result in an environment variable, and Linux refuses
// to start a program with one longer than 128 KiB (base64 grows it by a
// third): past that the run would fail instead of reporting.
const MessageBudget = 60 << 10

// cut shortens a message to at most limit bytes. It keeps the start of the
// evidence and the last two lines (the hint, and the reason a rule decided
// the score), cuts at line ends when it can, and says where the rest is.
func cut(msg string, limit int) string {
	if len(msg) <= limit {
		return msg
	}
	const more = "\n    … (cut: the whole report is in the log of the verify step)\n"
	tail := ""
	for n, end := 0, len(msg); n < 2; n++ {
		i := strings.LastIndexByte(msg[:end], '\n')
		if i < 0 || len(msg)-i-1 > limit/3 {
			break
		}
		tail, end = msg[i+1:], i
	}
	keep := max(limit-len(more)-len(tail), 0)
	for keep > 0 && !utf8.RuneStart(msg[keep]) {
		keep--
	}
	if i := strings.LastIndexByte(msg[:keep], '\n'); i > keep/2 {
		keep = i
	}
	return msg[:keep] + more + tail
}

// testStatus maps a task's graded status to the reporter's words: a
// skipped task (none of its checks could run here) could not be decided.
func testStatus(s report.Result) string {
	switch {
	case s.Passed():
		return StatusPass
	case s == report.Fail:
		return StatusFail
	}
	return StatusError
}

// Encode is the result as the reporter reads it: base64 of the JSON, on
// one line, as the classroom-resources graders write it.
func (r *Result) Encode() (string, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}

// Decode reads an encoded result (what the reporter does).
func Decode(encoded string) (*Result, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return nil, fmt.Errorf("classroom result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("classroom result: %w", err)
	}
	return &r, nil
}

// Write prints a verify report's result as the verify step's outputs: one
// line `<runner>=<base64>` per task (see TaskRunner), for $GITHUB_OUTPUT.
func Write(w io.Writer, lab *labs.Lab, rep *report.Report, credit grade.Credit) error {
	return WriteResult(w, lab, NewResult(lab, rep, credit))
}

// WriteResult prints res as Write does.
func WriteResult(w io.Writer, lab *labs.Lab, res *Result) error {
	for _, tr := range res.PerTask(lab) {
		enc, err := tr.Result.Encode()
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s=%s\n", tr.Runner, enc); err != nil {
			return err
		}
	}
	return nil
}

// ReadOutputs reads what Write printed back into one result per runner
// (what the reporter does with the step's outputs), in order.
func ReadOutputs(out string) ([]TaskResult, error) {
	var res []TaskResult
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, enc, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("classroom result: %q is not name=value", line)
		}
		r, err := Decode(enc)
		if err != nil {
			return nil, err
		}
		res = append(res, TaskResult{Runner: name, Result: r})
	}
	return res, nil
}
