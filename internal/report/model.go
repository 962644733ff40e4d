// Package report holds the result of verifying a lab and renders it: for a
// terminal (lipgloss, through iostreams.Styles), as plain text, JSON and
// JUnit XML. The model is plain data, so further formats (Markdown
// feedback, gradebook CSV, the HTML class report) are a function over it.
package report

import (
	"encoding/json"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Result is the outcome of a check or a task.
type Result string

// Results, from best to worst for a task.
const (
	Pass    Result = "pass"
	Warn    Result = "warn"    // passed, but something the course's solution adds beyond the lab text is missing
	Skipped Result = "skipped" // could not run here (e.g. no audit log on an existing cluster); never a pass
	Error   Result = "error"   // could not decide (a step before it failed, the API refused, ...)
	Fail    Result = "fail"
)

// Passed reports whether the status counts as passed (pass or warn).
func (s Result) Passed() bool { return s == Pass || s == Warn }

// Report is one run of `labctl verify` (or one submission in a grade run).
type Report struct {
	Lab   string `json:"lab"`
	Title string `json:"title"`
	Lang  string `json:"lang"`
	// Where it ran.
	Cluster   string `json:"cluster,omitempty"`
	Provider  string `json:"provider,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Operator is the identity of the operator under test; Project its
	// source directory (for source checks).
	Operator string `json:"operator,omitempty"`
	// OperatorProject is the kubebuilder project (PROJECT's projectName)
	// of the operator judged, and OperatorDir the directory it was built
	// from: with several operators on one cluster, the one chosen.
	OperatorProject string    `json:"operatorProject,omitempty"`
	OperatorDir     string    `json:"operatorDir,omitempty"`
	Project         string    `json:"project,omitempty"`
	Started         time.Time `json:"started"`
	Duration        Duration  `json:"duration"`
	Status          Result    `json:"status"`
	// WriteLatency is the median write round trip measured at the start
	// (timeouts stretch when it is slow); 0 when not measured.
	WriteLatency Duration `json:"writeLatency,omitempty"`
	Summary      Summary  `json:"summary"`
	Tasks        []*Task  `json:"tasks"`
	// Notes are facts about the run itself (cleanup left something behind,
	// the namespace was kept).
	Notes []string `json:"notes,omitempty"`
}

// Summary counts tasks by status and adds up points.
type Summary struct {
	Tasks     int `json:"tasks"`
	Passed    int `json:"passed"`
	Warned    int `json:"warned"`
	Failed    int `json:"failed"`
	Errors    int `json:"errors"`
	Skipped   int `json:"skipped"`
	Points    int `json:"points"`
	MaxPoints int `json:"maxPoints"`
}

// Task is one numbered task of the lab text and the checks that give
// evidence for it.
type Task struct {
	ID     string         `json:"id"`
	Title  string         `json:"title"`
	Hint   string         `json:"hint,omitempty"`
	Points int            `json:"points"`
	Score  int            `json:"score"`
	Hidden bool           `json:"hidden,omitempty"`
	Status Result         `json:"status"`
	Checks []*CheckResult `json:"checks"`
}

// CheckResult is one assertion and its evidence. A check may serve several tasks
// (then it appears under each of them).
type CheckResult struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Scenario string   `json:"scenario,omitempty"`
	Tasks    []string `json:"tasks"`
	Status   Result   `json:"status"`
	// Message says what was found, in one or two sentences.
	Message string `json:"message,omitempty"`
	// Expected and Observed are set for failures (and useful passes).
	Expected string `json:"expected,omitempty"`
	Observed string `json:"observed,omitempty"`
	// Object is the last observed object, trimmed (YAML).
	Object string `json:"object,omitempty"`
	// Events are the related Kubernetes events, newest last.
	Events []string `json:"events,omitempty"`
	// Logs is an excerpt of the operator's log.
	Logs []string `json:"logs,omitempty"`
	// Notes are further facts (e.g. why a conflict could not be provoked).
	Notes []string `json:"notes,omitempty"`
	// Hidden checks count, but a student's feedback withholds their
	// title and evidence (a grading policy's choice).
	Hidden bool `json:"hidden,omitempty"`
	// BlockedBy is the ID of the failed gate that kept this check from
	// running (it is then skipped: "not run: gate <task> <title> failed").
	BlockedBy string   `json:"blockedBy,omitempty"`
	Duration  Duration `json:"duration"`
}

// Finish computes each task's status and score from its checks, the
// summary and the report's status. Call it after the checks have run.
func (r *Report) Finish() {
	r.Summary = Summary{Tasks: len(r.Tasks)}
	for _, t := range r.Tasks {
		t.Status = TaskStatus(t.Checks)
		t.Score = 0
		if t.Status.Passed() {
			t.Score = t.Points
		}
		r.Summary.MaxPoints += t.Points
		r.Summary.Points += t.Score
		switch t.Status {
		case Pass:
			r.Summary.Passed++
		case Warn:
			r.Summary.Passed++
			r.Summary.Warned++
		case Fail:
			r.Summary.Failed++
		case Error:
			r.Summary.Errors++
		case Skipped:
			r.Summary.Skipped++
		}
	}
	r.Status = Pass
	switch {
	case r.Summary.Failed > 0:
		r.Status = Fail
	case r.Summary.Errors > 0:
		r.Status = Error
	case r.Summary.Skipped > 0:
		r.Status = Skipped
	case r.Summary.Warned > 0:
		r.Status = Warn
	}
}

// AllPassed reports whether every task passed (pass or warn): the only case
// in which verify exits 0.
func (r *Report) AllPassed() bool {
	for _, t := range r.Tasks {
		if !t.Status.Passed() {
			return false
		}
	}
	return len(r.Tasks) > 0
}

// TaskStatus folds check results: any failure fails the task; else any
// error makes it an error; a task whose checks were all skipped is skipped
// (not passed), and so is a task with a check that a failed gate kept from
// running: its evidence was not taken, so the checks that did run (often
// absences, true of an operator that does nothing) cannot pass it alone;
// it is not judged, the gate's own task is charged. Else a warning warns.
// verify and grade both judge a task with this one function.
func TaskStatus(checks []*CheckResult) Result {
	if len(checks) == 0 {
		return Skipped
	}
	has := map[Result]bool{}
	blocked := false
	for _, c := range checks {
		has[c.Status] = true
		if c.BlockedBy != "" {
			blocked = true
		}
	}
	switch {
	case has[Fail]:
		return Fail
	case has[Error]:
		return Error
	case blocked || !has[Pass] && !has[Warn]:
		return Skipped
	case has[Warn]:
		return Warn
	}
	return Pass
}

// Undecided are the checks that could not decide for a reason of their
// own: in error, not merely "not run" behind a step that failed. Their
// task is not judged; a grader measures again rather than charge it.
func (r *Report) Undecided() []*CheckResult {
	var out []*CheckResult
	for _, t := range r.Tasks {
		for _, c := range t.Checks {
			if c.Status == Error && !strings.HasPrefix(c.Message, NotRun) {
				out = append(out, c)
			}
		}
	}
	return out
}

// NotRun begins the message of a check that did not run because a step
// or gate before it failed (the checks package writes it).
const NotRun = "not run: "

// Headline is the check that says why a task did not pass: its first
// failed check, else the first that could not decide for a reason of its
// own (not one that never ran because a gate before it failed: that
// gate's result is the reason); nil when none did not pass.
func (t *Task) Headline() *CheckResult {
	var firstError, anyError *CheckResult
	for _, c := range t.Checks {
		switch c.Status {
		case Fail:
			return c
		case Error:
			if anyError == nil {
				anyError = c
			}
			if firstError == nil && !strings.HasPrefix(c.Message, NotRun) {
				firstError = c
			}
		}
	}
	if firstError != nil {
		return firstError
	}
	return anyError
}

// FailedTasks lists the IDs of the tasks that did not pass.
func (r *Report) FailedTasks() []string {
	var ids []string
	for _, t := range r.Tasks {
		if !t.Status.Passed() {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// Duration marshals as seconds with millisecond precision.
type Duration time.Duration

// MarshalJSON writes seconds as a number.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Round(time.Millisecond).Seconds())
}

// UnmarshalJSON reads seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*d = Duration(s * float64(time.Second))
	return nil
}

func (d Duration) String() string {
	t := time.Duration(d)
	if t < time.Second {
		return t.Round(time.Millisecond).String()
	}
	return t.Round(100 * time.Millisecond).String()
}

// Clean strips control characters (ANSI escapes included) from text that
// came from a cluster or an operator, keeping newlines and tabs, and
// replaces invalid UTF-8. Everything printed from a cluster goes through it.
func Clean(s string) string {
	if s == "" {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune('\uFFFD')
		case r == 0x1b: // ESC: drop a CSI/OSC sequence along with it
			i += size
			i += escapeLen(s[i:])
			continue
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r':
			// dropped: would move the cursor back over earlier output
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069'):
			// C0/C1 controls and bidirectional overrides
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// CleanLine is Clean for text shown on one line: newlines and tabs become
// spaces.
func CleanLine(s string) string {
	return strings.NewReplacer("\n", " ", "\t", " ").Replace(Clean(s))
}

// escapeLen is the length of the escape sequence body after ESC.
func escapeLen(s string) int {
	if s == "" {
		return 0
	}
	switch s[0] {
	case '[': // CSI: parameters then a final byte 0x40-0x7e
		for i := 1; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
		}
		return len(s)
	case ']': // OSC: until BEL or ESC \
		for i := 1; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	}
	return 1
}
