package report

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labctl/labctl/internal/humantime"
)

// The class report (report.html) is one self-contained page: the CSS and
// the one script are inline, the charts are inline SVG, nothing is loaded
// from anywhere. Every string from a submission reaches the page through
// html/template, which escapes it for where it lands; a Content-Security-
// Policy that allows only the page's own script (by its hash) is the
// second wall, should markup ever get through.

//go:embed html/report.html.tmpl
var htmlTemplateText string

// htmlScript makes the class table sortable. The page reads the same
// without it.
//
//go:embed html/report.js
var htmlScript string

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"points": FormatPoints,
	"mark":   Mark,
	"status": fbStatus,
	// line and text strip control characters (and bidirectional
	// overrides) from a submission's strings, as every other format does.
	"line": CleanLine,
	"text": Clean,
}).Parse(htmlTemplateText))

// htmlCSP allows inline styles and the page's own script, nothing else: no
// other script, no images, fonts, frames or connections.
var htmlCSP = func() string {
	sum := sha256.Sum256([]byte(htmlScript))
	return "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; base-uri 'none'; form-action 'none'"
}()

// htmlPage is what the template shows.
type htmlPage struct {
	Lang   string
	W      map[string]string
	CSP    string
	Script template.JS

	Lab, Title, Version, Credit, Limits, When string
	MaxPoints                                 float64

	Students, Scored, NotGraded, FullMarks int
	Median, Mean                           string
	// Spread is the five-number summary of the totals: min, quartiles, max.
	Spread string

	Tasks     []GradeTask
	Rows      []htmlRow
	TaskChart htmlTaskChart
	TaskStats []htmlTaskStat
	ShareOf   string
	Histogram htmlHistogram
	// Ungraded are the submissions that did not run to the end; Problems
	// sorts them by whose fault it was.
	Ungraded []htmlRow
	Problems []htmlProblems
	Feedback []htmlFeedback
}

// htmlRow is a student's row of the class table.
type htmlRow struct {
	Anchor, Student string
	Score           float64
	// Percent of the maximum, 0-100, for the total's bar.
	Percent      float64
	Level        string // full, part, zero: the total's colour (shareLevel)
	Cells        []htmlCell
	Outcome      GradeOutcome
	OutcomeText  string
	FirstError   string
	OutcomeOrder int
}

// htmlCell is a student's points for one task.
type htmlCell struct {
	Text  string
	Sort  float64
	Level string // full, part, zero, none
	Mark  string
	Tip   string
	// Link is the anchor of the task in the student's feedback, where it
	// says which check failed and why (cells that lost points).
	Link string
}

// htmlTaskStat is a task's line of the task table.
type htmlTaskStat struct {
	GradeTask
	Passed, Of         int
	CheckTitle         string
	CheckCount         int
	Reason             string
	ReasonCount        int
	NoCheck, NoFailure bool
}

// htmlTaskChart is the bar chart of the share of students who passed
// each task.
type htmlTaskChart struct {
	Width, Height int
	Bars          []htmlTaskBar
}

type htmlTaskBar struct {
	RectY, TextY int
	Label, Full  string
	Width, Track float64
	Level        string
	BarX, ValueX int
	Percent      int
	Passed, Of   int
}

// htmlHistogram is the distribution of totals.
type htmlHistogram struct {
	Width, Height, Base int
	// Left and Right end the axis; Top is where the tallest bar ends.
	Left, Right, Top, TickY float64
	Bars                    []htmlBin
	Ticks                   []htmlTick
	Median                  *htmlTick
}

type htmlBin struct {
	X, Y, W, H, TextX, TextY float64
	Count                    int
	Level, Range             string
}

type htmlTick struct {
	X     float64
	Label string
}

// htmlFeedback is a student's feedback section.
type htmlFeedback struct {
	Anchor string
	*Feedback
	Level                       string
	Source, Commit, OutcomeWord string
	Notes                       []string
	When                        string
}

// WriteHTMLReport writes report.html: the class at a glance (the class
// table, the share of students who passed each task and why the others
// did not, the distribution of totals, who could not be graded and why)
// and every student's feedback, hidden tasks included (it is for the
// instructor).
func WriteHTMLReport(w io.Writer, g *Gradebook) error {
	return htmlTemplate.Execute(w, newHTMLPage(g))
}

func newHTMLPage(g *Gradebook) *htmlPage {
	lang := g.Lang
	if _, ok := htmlWords[lang]; !ok {
		lang = "en"
	}
	words := htmlWordsIn(lang)
	p := &htmlPage{Lang: lang, W: words, CSP: htmlCSP, Script: template.JS(htmlScript),
		Lab: g.Lab, Title: g.Title, MaxPoints: g.MaxPoints, Tasks: g.Tasks, Students: len(g.Submissions)}
	p.Version, p.Limits, p.When = words["unknown"], words["noRun"], ""
	if r := g.Run; r != nil {
		if r.Version != "" {
			p.Version = r.Version
		}
		p.Limits = htmlLimits(words, lang, r)
		p.When = fmt.Sprintf(words["started"], htmlTime(r.Started))
	}
	if len(g.Submissions) > 0 {
		first, last := g.Submissions[0].Graded, g.Submissions[0].Graded
		for _, s := range g.Submissions {
			if s.Graded.Before(first) {
				first = s.Graded
			}
			if s.Graded.After(last) {
				last = s.Graded
			}
		}
		span := fmt.Sprintf(words["between"], htmlTime(first), htmlTime(last))
		if p.When == "" {
			p.When = span
		} else {
			p.When = span + "; " + p.When
		}
	}
	switch g.Credit {
	case "tasks":
		p.Credit = words["creditTasks"]
	case "checks":
		p.Credit = words["creditChecks"]
	default:
		p.Credit = g.Credit
	}

	var totals []float64
	for i, s := range g.Submissions {
		row := newHTMLRow(words, g, s, i)
		p.Rows = append(p.Rows, row)
		if s.Outcome == OutcomeError {
			p.NotGraded++
		} else {
			totals = append(totals, s.Score)
			if g.MaxPoints > 0 && s.Score >= g.MaxPoints {
				p.FullMarks++
			}
		}
		if s.Outcome != OutcomeGraded {
			p.Ungraded = append(p.Ungraded, row)
		}
		p.Feedback = append(p.Feedback, htmlFeedback{Anchor: row.Anchor, Feedback: NewFeedback(g, s, true),
			Level: row.Level, Source: s.Source, Commit: s.Commit, OutcomeWord: row.OutcomeText, Notes: s.Notes,
			When: htmlTime(s.Graded) + " · " + humantime.Duration(time.Duration(s.Duration), lang)})
	}
	p.Problems = problemTables(words, p.Ungraded)
	p.Scored = len(totals)
	p.Median, p.Mean = "—", "—"
	if len(totals) > 0 {
		p.Median, p.Mean = FormatPoints(median(totals)), FormatPoints(mean(totals))
		p.Spread = spread(words, totals)
	}
	p.ShareOf = fmt.Sprintf(words["shareOf"], p.Scored)
	p.TaskStats = taskStats(g)
	p.TaskChart = taskChart(p.TaskStats, words["hidden"])
	p.Histogram = histogram(g.MaxPoints, totals)
	return p
}

func newHTMLRow(words map[string]string, g *Gradebook, s *GradedSubmission, i int) htmlRow {
	row := htmlRow{Anchor: fmt.Sprintf("s-%d", i+1), Student: s.Student, Score: s.Score,
		Outcome: s.Outcome, OutcomeText: outcomeWord(words, s.Outcome), FirstError: firstErrorLine(s)}
	row.OutcomeOrder = slices.Index([]GradeOutcome{OutcomeGraded, OutcomeTimeout, OutcomeDeployFailed, OutcomeBuildFailed, OutcomeError}, s.Outcome)
	share := 0.0
	if g.MaxPoints > 0 {
		share = min(max(s.Score/g.MaxPoints, 0), 1)
	}
	row.Percent, row.Level = math.Round(1000*share)/10, shareLevel(share)
	for _, t := range g.Tasks {
		ts, ok := s.Task(t.ID)
		cell := htmlCell{Text: FormatPoints(ts.Score), Sort: ts.Score, Level: level(ts.Score, float64(t.Points))}
		switch {
		case !ok || s.Outcome == OutcomeError:
			cell = htmlCell{Text: "—", Sort: -1, Level: "none"}
		case cell.Level == "full":
			cell.Mark = "✓"
		case cell.Level == "part":
			cell.Mark = "◐"
		default:
			cell.Mark = "✗"
		}
		if cell.Level == "part" || cell.Level == "zero" {
			cell.Link = taskAnchor(row.Anchor, t.ID)
		}
		cell.Tip = fmt.Sprintf("%s %s: %s / %d", t.ID, t.Title, cell.Text, t.Points)
		if ok && ts.Checks > 0 {
			cell.Tip += fmt.Sprintf(" (%d/%d %s)", ts.Passed, ts.Checks, words["checks"])
		}
		row.Cells = append(row.Cells, cell)
	}
	return row
}

// htmlProblems is a table of submissions that did not run to the end,
// with what it means for their scores.
type htmlProblems struct {
	Note string
	Rows []htmlRow
}

// problemTables keeps the submission's faults (it does not build, deploy
// or finish in time: scored) apart from labctl's or the machine's (not
// counted: the instructor re-runs them).
func problemTables(words map[string]string, ungraded []htmlRow) []htmlProblems {
	theirs := htmlProblems{Note: words["failedRuns"]}
	ours := htmlProblems{Note: words["unjudgedRuns"]}
	for _, row := range ungraded {
		if row.Outcome == OutcomeError {
			ours.Rows = append(ours.Rows, row)
		} else {
			theirs.Rows = append(theirs.Rows, row)
		}
	}
	var out []htmlProblems
	for _, t := range []htmlProblems{theirs, ours} {
		if len(t.Rows) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// taskAnchor is the id of a failed task's section in a student's feedback.
func taskAnchor(student, task string) string { return student + "-" + task }

// level sorts a score into full marks, partial credit, or nothing.
func level(score, max float64) string {
	switch {
	case max > 0 && score >= max:
		return "full"
	case score > 0:
		return "part"
	}
	return "zero"
}

// shareLevel colours a share (0-1) of the points or of the class: green
// from 80%, amber from 50%, else red.
func shareLevel(share float64) string {
	switch {
	case share >= 0.8:
		return "full"
	case share >= 0.5:
		return "part"
	}
	return "zero"
}

func outcomeWord(words map[string]string, o GradeOutcome) string {
	if w, ok := words["oc-"+string(o)]; ok {
		return w
	}
	return string(o)
}

// firstErrorLine is the one line that says why a submission was not fully
// graded.
func firstErrorLine(s *GradedSubmission) string {
	line := s.Message
	if line == "" {
		for _, l := range s.BuildErrors {
			if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#") {
				line = l
				break
			}
		}
	}
	return shorten(CleanLine(line), 300)
}

// shorten cuts text to n runes, with an ellipsis.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

func htmlTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

func htmlLimits(words map[string]string, lang string, r *GradeRun) string {
	var parts []string
	if r.Timeout > 0 {
		parts = append(parts, fmt.Sprintf(words["wallTime"], humantime.Duration(time.Duration(r.Timeout), lang)))
	}
	if r.CPU > 0 {
		parts = append(parts, fmt.Sprintf(words["cpu"], humantime.Duration(time.Duration(r.CPU), lang)))
	}
	if r.MemoryBytes > 0 {
		parts = append(parts, fmt.Sprintf(words["memory"], r.MemoryBytes>>20))
	}
	if r.CPU == 0 && r.MemoryBytes == 0 {
		parts = append(parts, words["noLimits"])
	}
	if r.Jobs > 0 {
		parts = append(parts, fmt.Sprintf(words["jobs"], r.Jobs))
	}
	if r.BoxLimits != "" {
		parts = append(parts, r.BoxLimits) // a technical line, in English
	}
	return strings.Join(parts, " · ")
}
