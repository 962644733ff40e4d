package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"
)

// Gradebook is a class graded on one lab (`labctl grade`): the data behind
// gradebook.csv, results.json, junit.xml and each student's feedback.
type Gradebook struct {
	Lab   string `json:"lab"`
	Title string `json:"title"`
	Lang  string `json:"lang"`
	// Tasks are the gradebook's columns, in the lab's order.
	Tasks     []GradeTask `json:"tasks"`
	MaxPoints float64     `json:"maxPoints"`
	// Credit is the scoring policy (checks: partial credit per task;
	// tasks: all or nothing per task).
	Credit string `json:"credit"`
	// Policy names the instructor's grading policy applied ("" for the
	// labs' defaults).
	Policy string `json:"policy,omitempty"`
	// Submissions are sorted by student.
	Submissions []*GradedSubmission `json:"submissions"`
	// Run describes the latest run of `labctl grade` that wrote the
	// gradebook (results.json files of older labctl versions have none).
	Run *GradeRun `json:"run,omitempty"`
}

// GradeRun is how a run of `labctl grade` graded: which labctl, when, and
// the limits every submission had.
type GradeRun struct {
	// Version is labctl's build version.
	Version string    `json:"version,omitempty"`
	Started time.Time `json:"started"`
	// Jobs is how many submissions were graded at once.
	Jobs int `json:"jobs,omitempty"`
	// Timeout is the wall-time limit of a submission, build to teardown.
	Timeout Duration `json:"timeout,omitempty"`
	// CPU and MemoryBytes limit each submission's manager (0: no limit).
	CPU         Duration `json:"cpu,omitempty"`
	MemoryBytes int64    `json:"memoryBytes,omitempty"`
	// BoxLimits says how each submission's box (cluster, build, manager)
	// was limited as a whole: its cgroup's limits, or why there were
	// per-process limits only.
	BoxLimits string `json:"boxLimits,omitempty"`
}

// GradeTask is one task of the lab as the gradebook counts it.
type GradeTask struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Points int    `json:"points"`
	// Hidden tasks count, but students see no detail about them.
	Hidden bool `json:"hidden,omitempty"`
}

// GradeOutcome says how far grading a submission got.
type GradeOutcome string

// Outcomes of a submission.
const (
	// OutcomeGraded: the lab's checks ran against the submission's operator.
	OutcomeGraded GradeOutcome = "graded"
	// OutcomeBuildFailed: the project does not compile; no task is scored.
	OutcomeBuildFailed GradeOutcome = "build-failed"
	// OutcomeDeployFailed: the project's manifests (config/default) could
	// not be rendered or installed; no task is scored.
	OutcomeDeployFailed GradeOutcome = "deploy-failed"
	// OutcomeTimeout: the wall-time limit ended the run; checks that had
	// finished still count.
	OutcomeTimeout GradeOutcome = "timeout"
	// OutcomeError: labctl could not grade it (no project, clone failed,
	// the cluster did not start). Not the student's score: grade again.
	OutcomeError GradeOutcome = "error"
)

// GradedSubmission is one student's result.
type GradedSubmission struct {
	Student string `json:"student"`
	// Source is the directory, or the git URL and ref, that was graded.
	Source string `json:"source"`
	// Commit is the git commit graded, for submissions cloned from git.
	Commit string `json:"commit,omitempty"`
	// Built says what labctl built from the submission and ran as its
	// manager (the main package of cmd/main.go, from which sources).
	Built    string       `json:"built,omitempty"`
	Graded   time.Time    `json:"graded"`
	Duration Duration     `json:"duration"`
	Outcome  GradeOutcome `json:"outcome"`
	// Message says in one line why the submission was not fully graded
	// (the first compiler error, the manager that did not start, ...).
	Message string `json:"message,omitempty"`
	// BuildErrors are the first lines of the compiler's output.
	BuildErrors []string    `json:"buildErrors,omitempty"`
	Score       float64     `json:"score"`
	MaxPoints   float64     `json:"maxPoints"`
	Tasks       []TaskScore `json:"tasks"`
	// Report is the full verification, when it ran.
	Report *Report `json:"report,omitempty"`
	// Notes are facts about the run (limits hit, processes killed).
	Notes []string `json:"notes,omitempty"`
	// Phases time the steps of grading it (clone, cluster, deploy, verify,
	// teardown), in order.
	Phases []Phase `json:"phases,omitempty"`
}

// Phase is one timed step of grading a submission.
type Phase struct {
	Name     string   `json:"name"`
	Duration Duration `json:"duration"`
}

// TaskScore is a submission's credit for one task.
type TaskScore struct {
	ID     string  `json:"id"`
	Points int     `json:"points"`
	Score  float64 `json:"score"`
	Status Result  `json:"status"`
	// Passed of Checks checks passed (pass or warn); Checks counts the
	// checks that ran, Skipped those that could not run here (they
	// neither earn nor cost points).
	Passed  int `json:"passed"`
	Checks  int `json:"checks"`
	Skipped int `json:"skipped,omitempty"`
	// Reason is set when a rule, not the count of checks, decided the
	// score (a gate check failed).
	Reason string `json:"reason,omitempty"`
}

// RoundPoints rounds a score to two decimals, as every file shows it.
func RoundPoints(x float64) float64 { return math.Round(x*100) / 100 }

// FormatPoints writes a score without trailing zeros: 7, 2.5, 1.67.
func FormatPoints(x float64) string {
	return strconv.FormatFloat(RoundPoints(x), 'f', -1, 64)
}

// Task returns the submission's score for a task, if any.
func (s *GradedSubmission) Task(id string) (TaskScore, bool) {
	for _, t := range s.Tasks {
		if t.ID == id {
			return t, true
		}
	}
	return TaskScore{}, false
}

// Put adds a submission, replacing the student's earlier result, and
// keeps the submissions sorted by student.
func (g *Gradebook) Put(s *GradedSubmission) {
	for i, old := range g.Submissions {
		if old.Student == s.Student {
			g.Submissions[i] = s
			return
		}
	}
	g.Submissions = append(g.Submissions, s)
	sort.Slice(g.Submissions, func(i, j int) bool { return g.Submissions[i].Student < g.Submissions[j].Student })
}

// Submission returns a student's result.
func (g *Gradebook) Submission(student string) (*GradedSubmission, bool) {
	for _, s := range g.Submissions {
		if s.Student == student {
			return s, true
		}
	}
	return nil, false
}

// ReadGradebookJSON reads results.json.
func ReadGradebookJSON(r io.Reader) (*Gradebook, error) {
	g := &Gradebook{}
	if err := json.NewDecoder(r).Decode(g); err != nil {
		return nil, err
	}
	return g, nil
}

// WriteGradebookJSON writes results.json: everything, hidden checks and
// full reports included (it is for the instructor).
func WriteGradebookJSON(w io.Writer, g *Gradebook) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(g)
}

// WriteGradebookCSV writes gradebook.csv: student, total, max, then one
// column per task (its ID) holding the points earned. A submission labctl
// could not grade (OutcomeError: the grader's failure, not the student's
// score) has empty cells, not zeros: a spreadsheet or LMS that imports the
// file records no grade rather than 0.
func WriteGradebookCSV(w io.Writer, g *Gradebook) error {
	cw := csv.NewWriter(w)
	head := []string{"student", "total", "max"}
	for _, t := range g.Tasks {
		head = append(head, t.ID)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, s := range g.Submissions {
		row := []string{csvSafe(s.Student), FormatPoints(s.Score), FormatPoints(g.MaxPoints)}
		for _, t := range g.Tasks {
			ts, _ := s.Task(t.ID)
			row = append(row, FormatPoints(ts.Score))
		}
		if s.Outcome == OutcomeError {
			row[1] = ""
			clear(row[3:])
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvSafe keeps a spreadsheet from reading a cell as a formula.
func csvSafe(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@') {
		return "'" + s
	}
	return s
}

// SameColumns reports a gradebook whose tasks do not match a lab's (a --out
// directory reused for another lab, or a lab whose tasks changed).
func (g *Gradebook) SameColumns(tasks []GradeTask) error {
	if len(g.Tasks) != len(tasks) {
		return fmt.Errorf("it has %d task columns, the lab has %d", len(g.Tasks), len(tasks))
	}
	for i := range tasks {
		if g.Tasks[i].ID != tasks[i].ID || g.Tasks[i].Points != tasks[i].Points {
			return fmt.Errorf("column %d is task %s (%d points), the lab's is %s (%d points)",
				i+1, g.Tasks[i].ID, g.Tasks[i].Points, tasks[i].ID, tasks[i].Points)
		}
	}
	return nil
}
