// Package classroom plugs labctl into GitHub Classroom, where each
// student's repository is graded by GitHub Actions in its own runner: the
// workflow a template repository runs (`labctl classroom init`) and the
// result GitHub Classroom's autograding reporter reads (`labctl verify -o
// classroom`).
//
// The reporter (classroom-resources/autograding-grading-reporter) takes a
// comma-separated list of step ids in its `runners` input and, for each,
// reads the environment variable <ID in upper case>_RESULTS: base64 of a
// JSON document {version, status, max_score, tests: [{name, status, score,
// max_score, message, ...}]}. Graders such as autograding-command-grader
// hand it over as the step output `result`. labctl does the same: verify
// prints the base64 on stdout, the workflow's verify step (id RunnerID)
// writes it as `result=...` to $GITHUB_OUTPUT, and the reporter step maps
// it to LABCTL_RESULTS. Classroom's points are the sum of the tests'
// scores out of max_score.
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

// RunnerID is the id of the workflow's verify step and the reporter's
// `runners` input; the reporter reads the result from ResultsEnv.
const RunnerID = "labctl"

// ResultsEnv is the variable the reporter reads for RunnerID.
var ResultsEnv = strings.ToUpper(RunnerID) + "_RESULTS"

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

// NewResult scores a verify report the way `labctl grade` does (task
// credit: a task earns its points when verify passes it) and makes one test
// per task of the lab, in the lab's order, so the tests' max_score add up
// to the lab's points. A task the report lacks (verify ran with --task) is
// an error worth nothing.
func NewResult(lab *labs.Lab, rep *report.Report) *Result {
	lang := rep.Lang
	byID := map[string]*report.Task{}
	for _, t := range rep.Tasks {
		byID[t.ID] = t
	}
	scores, _ := grade.Score(lab, rep, grade.CreditTasks)
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
	for _, t := range res.Tests {
		switch {
		case t.Status == StatusFail:
			res.Status = StatusFail
		case t.Status == StatusError && res.Status == StatusPass:
			res.Status = StatusError
		}
	}
	return res
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

// Write prints the encoded result of a verify report and a newline: the
// value of the verify step's `result` output.
func Write(w io.Writer, lab *labs.Lab, rep *report.Report) error {
	enc, err := NewResult(lab, rep).Encode()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, enc)
	return err
}
