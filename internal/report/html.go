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

// htmlWords are the fixed words of the class report.
var htmlWords = map[string]map[string]string{
	"en": {
		"classReport": "class report", "credit": "Credit", "limits": "Limits", "ran": "Graded",
		"students": "students", "median": "median", "mean": "mean", "min": "min", "max": "max", "q1": "Q1", "q3": "Q3", "fullMarks": "full marks",
		"class": "Class", "tasks": "Tasks", "distribution": "Distribution of totals", "feedback": "Feedback",
		"problems": "Did not run to the end", "problemsCard": "not graded by labctl: re-run",
		"failedRuns":   "The submission's fault: it does not build, deploy or finish in time. Scored: the tasks it did not reach earn nothing.",
		"unjudgedRuns": "labctl's or the machine's fault: not scored and not counted. Re-run labctl grade for these submissions.",
		"student":      "Student", "total": "Total", "outcome": "Outcome", "hidden": "hidden", "passed": "Passed",
		"commonCheck": "Most common failing check", "reason": "Its most common reason", "message": "First error line",
		"noFailures": "every scored submission passed", "noCheck": "no check ran (build or deploy failed)",
		"shareOf":      "of %d scored submissions",
		"nothingWrong": "Every submission was graded.", "toTable": "class table", "source": "source", "commit": "commit",
		"students1": "student(s)", "times": "×", "count": "submissions",
		"unknown": "unknown", "noRun": "not recorded (graded by an older labctl)",
		"creditTasks":  "tasks: a task earns its points when every check of it that ran passed; skipped checks neither earn nor cost points",
		"creditChecks": "checks: a task earns its points times the share of its checks that ran and passed (skipped ones do not count), nothing when a gate check failed",
		"wallTime":     "wall time %s per submission", "cpu": "manager CPU time %s", "memory": "manager memory %d MiB", "jobs": "%d at a time",
		"noLimits": "no CPU or memory limits", "between": "%s to %s", "started": "last run started %s",
		"noScript": "Click a column's heading to sort by it, a cell to read why it lost points.",
		"filter":   "Filter the class", "filterHint": "name, outcome or task: 4.2, build failed", "details": "details",
		"oc-graded": "graded", "oc-build-failed": "build failed", "oc-deploy-failed": "deploy failed", "oc-timeout": "timed out", "oc-error": "not graded",
	},
	"ru": {
		"classReport": "отчёт по группе", "credit": "Оценивание", "limits": "Ограничения", "ran": "Проверено",
		"students": "студентов", "median": "медиана", "mean": "среднее", "min": "мин.", "max": "макс.", "q1": "Q1", "q3": "Q3", "fullMarks": "полный балл",
		"class": "Группа", "tasks": "Задачи", "distribution": "Распределение баллов", "feedback": "Отзывы",
		"problems": "Не дошли до конца", "problemsCard": "не проверено labctl: перезапустить",
		"failedRuns":   "По вине решения: не собирается, не устанавливается или не уложилось во время. Оценено: недостигнутые задачи баллов не приносят.",
		"unjudgedRuns": "По вине labctl или машины: не оценено и не учитывается. Запустите labctl grade для этих решений ещё раз.",
		"student":      "Студент", "total": "Итого", "outcome": "Итог проверки", "hidden": "скрыта", "passed": "Прошли",
		"commonCheck": "Чаще всего не проходит", "reason": "Чаще всего потому, что", "message": "Первая строка ошибки",
		"noFailures": "все оценённые решения прошли", "noCheck": "проверки не запускались (сборка или установка не удалась)",
		"shareOf":      "из %d оценённых решений",
		"nothingWrong": "Все решения проверены.", "toTable": "к таблице", "source": "источник", "commit": "коммит",
		"students1": "студ.", "times": "×", "count": "решений",
		"unknown": "неизвестно", "noRun": "не записаны (проверено старой версией labctl)",
		"creditTasks":  "по задачам: задача приносит баллы, когда пройдены все её проверки, которые удалось запустить; пропущенные проверки баллов не дают и не отнимают",
		"creditChecks": "по проверкам: баллы задачи умножаются на долю пройденных среди запущенных проверок (пропущенные не учитываются); ноль, если не пройдена ключевая проверка",
		"wallTime":     "время %s на решение", "cpu": "процессорное время менеджера %s", "memory": "память менеджера %d МиБ", "jobs": "по %d одновременно",
		"noLimits": "без ограничений CPU и памяти", "between": "с %s по %s", "started": "последний запуск %s",
		"noScript": "Щёлкните заголовок столбца, чтобы отсортировать по нему, ячейку — чтобы узнать, за что сняты баллы.",
		"filter":   "Фильтр группы", "filterHint": "имя, итог или задача: 4.2, не собирается", "details": "подробности",
		"oc-graded": "проверено", "oc-build-failed": "не собирается", "oc-deploy-failed": "не устанавливается", "oc-timeout": "превышено время", "oc-error": "не проверено",
	},
}

// htmlWordsIn returns the report's words in a language, English for any
// word (or language) without a translation.
// The feedback's own words (expected, observed, hint, ...) are the
// feedback file's.
func htmlWordsIn(lang string) map[string]string {
	out := map[string]string{}
	for k := range feedbackWords["en"] {
		out[k] = fbWord(lang, k)
	}
	// The feedback's section titles; "passed" is a column here.
	out["whatPassed"], out["whatFailed"] = out["passed"], out["failed"]
	for _, l := range []string{"en", lang} {
		for k, v := range htmlWords[l] {
			out[k] = v
		}
	}
	return out
}

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
		p.Limits = htmlLimits(words, r)
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
			When: htmlTime(s.Graded) + " · " + time.Duration(s.Duration).Round(time.Second).String()})
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

func htmlLimits(words map[string]string, r *GradeRun) string {
	var parts []string
	if r.Timeout > 0 {
		parts = append(parts, fmt.Sprintf(words["wallTime"], time.Duration(r.Timeout)))
	}
	if r.CPU > 0 {
		parts = append(parts, fmt.Sprintf(words["cpu"], time.Duration(r.CPU)))
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

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile is the q-quantile of sorted values, interpolated between the
// two nearest (the way spreadsheets compute it; q=0.5 is the median).
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(pos)
	if lo+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (pos-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// spread reads "min 0 · Q1 25 · median 30 · Q3 40 · max 45".
func spread(words map[string]string, totals []float64) string {
	s := slices.Sorted(slices.Values(totals))
	var parts []string
	for _, q := range []struct {
		word string
		at   float64
	}{{"min", 0}, {"q1", 0.25}, {"median", 0.5}, {"q3", 0.75}, {"max", 1}} {
		parts = append(parts, words[q.word]+" "+FormatPoints(math.Round(10*quantile(s, q.at))/10))
	}
	return strings.Join(parts, " · ")
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// taskStats counts, for each task, the scored submissions that passed it,
// and among the others the check that failed most often and the message it
// gave most often. Ties go to the check first in the task, and to the
// message of the first student: the page is the same for the same class.
func taskStats(g *Gradebook) []htmlTaskStat {
	var out []htmlTaskStat
	for _, t := range g.Tasks {
		st := htmlTaskStat{GradeTask: t}
		type tally struct {
			title    string
			count    int
			first    int
			messages map[string]int
			order    []string
		}
		checks := map[string]*tally{}
		var order []string
		for _, s := range g.Submissions {
			if s.Outcome == OutcomeError {
				continue
			}
			st.Of++
			ts, _ := s.Task(t.ID)
			if ts.Status.Passed() {
				st.Passed++
				continue
			}
			if s.Report == nil {
				continue
			}
			for _, rt := range s.Report.Tasks {
				if rt.ID != t.ID {
					continue
				}
				for _, c := range rt.Checks {
					if c.Status.Passed() {
						continue
					}
					tl := checks[c.ID]
					if tl == nil {
						tl = &tally{title: c.Title, messages: map[string]int{}, first: len(order)}
						checks[c.ID] = tl
						order = append(order, c.ID)
					}
					tl.count++
					msg := shorten(CleanLine(c.Message), 240)
					if msg == "" {
						continue
					}
					if tl.messages[msg] == 0 {
						tl.order = append(tl.order, msg)
					}
					tl.messages[msg]++
				}
			}
		}
		var best *tally
		for _, id := range order {
			if tl := checks[id]; best == nil || tl.count > best.count {
				best = tl
			}
		}
		switch {
		case best != nil:
			st.CheckTitle, st.CheckCount = best.title, best.count
			for _, m := range best.order {
				if best.messages[m] > st.ReasonCount {
					st.Reason, st.ReasonCount = m, best.messages[m]
				}
			}
		case st.Passed == st.Of:
			st.NoFailure = true
		default:
			st.NoCheck = true
		}
		out = append(out, st)
	}
	return out
}

// Geometry of the charts, in SVG user units (the SVGs scale to the page).
const (
	chartWidth   = 760
	taskRow      = 30
	taskLabelW   = 300
	taskBarW     = 330
	histHeight   = 230
	histBarsTop  = 40
	histBarsBase = 190
)

func taskChart(stats []htmlTaskStat, hidden string) htmlTaskChart {
	c := htmlTaskChart{Width: chartWidth, Height: len(stats)*taskRow + 8}
	for i, st := range stats {
		share := 0.0
		if st.Of > 0 {
			share = float64(st.Passed) / float64(st.Of)
		}
		full := st.ID + "  " + st.Title
		label := shorten(full, 40)
		if st.Hidden {
			label = shorten(full, 40-utf8.RuneCountInString(hidden)-3) + " (" + hidden + ")"
		}
		b := htmlTaskBar{
			RectY: 4 + i*taskRow + 6, TextY: 4 + i*taskRow + 20, Label: label, Full: full,
			BarX: taskLabelW, Track: taskBarW, Width: math.Round(share*taskBarW*10) / 10,
			ValueX: taskLabelW + taskBarW + 12, Percent: int(math.Round(share * 100)), Passed: st.Passed, Of: st.Of,
		}
		b.Level = shareLevel(share)
		c.Bars = append(c.Bars, b)
	}
	return c
}

// histogram bins totals into at most ten bins of a round width, the last
// one closed (full marks fall in it).
func histogram(maxPoints float64, totals []float64) htmlHistogram {
	const left, right = 16.0, 16.0
	h := htmlHistogram{Width: chartWidth, Height: histHeight, Base: histBarsBase, Left: left, Right: chartWidth - right, Top: histBarsTop, TickY: histBarsBase + 20}
	if maxPoints <= 0 {
		return h
	}
	width := 1.0
	for _, w := range []float64{1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000} {
		width = w
		if math.Ceil(maxPoints/w) <= 10 {
			break
		}
	}
	bins := int(math.Ceil(maxPoints / width))
	counts := make([]int, bins)
	for _, t := range totals {
		i := int(math.Floor(t / width))
		counts[min(max(i, 0), bins-1)]++
	}
	most := slices.Max(append(counts, 1))
	slot := (chartWidth - left - right) / float64(bins)
	x := func(points float64) float64 { return math.Round((left+points/width*slot)*10) / 10 }
	for i, n := range counts {
		lo, hi := float64(i)*width, min(float64(i+1)*width, maxPoints)
		barH := math.Round(float64(n)/float64(most)*(histBarsBase-histBarsTop)*10) / 10
		b := htmlBin{X: x(lo) + 3, W: math.Round((x(hi)-x(lo)-6)*10) / 10, Y: histBarsBase - barH, H: barH, Count: n,
			Level: shareLevel((lo + hi) / 2 / maxPoints), TextY: histBarsBase - barH - 6}
		b.TextX = math.Round((b.X+b.W/2)*10) / 10
		b.Range = fmt.Sprintf("%s–%s", FormatPoints(lo), FormatPoints(hi))
		h.Bars = append(h.Bars, b)
		h.Ticks = append(h.Ticks, htmlTick{X: x(lo), Label: FormatPoints(lo)})
	}
	h.Ticks = append(h.Ticks, htmlTick{X: x(maxPoints), Label: FormatPoints(maxPoints)})
	if len(totals) > 0 {
		m := median(totals)
		h.Median = &htmlTick{X: x(min(m, maxPoints)), Label: FormatPoints(m)}
	}
	return h
}
