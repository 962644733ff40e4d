package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/humantime"
)

// feedbackWords are the fixed words of a student's feedback file.
var feedbackWords = map[string]map[string]string{
	"en": {
		"feedback": "feedback for", "score": "Score", "graded": "graded", "task": "Task", "points": "Points",
		"result": "Result", "passed": "What passed", "failed": "What did not pass", "hint": "Hint",
		"expected": "expected", "observed": "observed", "object": "last observed object", "events": "events",
		"logs": "operator log", "note": "note", "hidden": "Hidden tasks",
		"hiddenText":   "%d hidden task(s), worth %s points, are part of the score; their checks are not shown here.",
		"buildFailed":  "The project does not build, so no task could be checked. The compiler says:",
		"timeout":      "Grading stopped at the time limit; checks that had not finished count as not passed.",
		"deployFailed": "The project's manifests (config/default) could not be installed, so no task could be checked.",
		"error":        "labctl could not grade this submission; this is not your score, your instructor will grade it again.",
		"pass":         "passed", "warn": "passed with a warning", "fail": "failed", "skipped": "skipped", "errorStatus": "could not be checked",
		"withheld": "hidden", "checks": "checks", "why": "Why",
		"policy": "Grading policy", "built": "Manager graded", "defaultPolicy": "the lab's defaults", "hiddenCheck": "a hidden check",
	},
	"ru": {
		"feedback": "отзыв для", "score": "Баллы", "graded": "проверено", "task": "Задача", "points": "Баллы",
		"result": "Результат", "passed": "Что получилось", "failed": "Что не получилось", "hint": "Подсказка",
		"expected": "ожидалось", "observed": "наблюдалось", "object": "последнее состояние объекта", "events": "события",
		"logs": "журнал оператора", "note": "примечание", "hidden": "Скрытые задачи",
		"hiddenText":   "Скрытые задачи (%d, %s баллов) входят в оценку; их проверки здесь не показаны.",
		"buildFailed":  "Проект не собирается, поэтому ни одну задачу проверить не удалось. Компилятор сообщает:",
		"timeout":      "Проверка остановлена по лимиту времени; незавершённые проверки не засчитаны.",
		"deployFailed": "Манифесты проекта (config/default) не удалось установить, поэтому ни одну задачу проверить не удалось.",
		"error":        "labctl не смог проверить это решение; это не ваша оценка, преподаватель проверит его снова.",
		"pass":         "пройдено", "warn": "пройдено с предупреждением", "fail": "не пройдено", "skipped": "пропущено", "errorStatus": "не удалось проверить",
		"withheld": "скрыто", "checks": "проверок", "why": "Причина",
		"policy": "Правила оценки", "built": "Проверенный менеджер", "defaultPolicy": "по умолчанию для лабораторной", "hiddenCheck": "скрытая проверка",
	},
}

func fbWord(lang, key string) string {
	if m, ok := feedbackWords[lang]; ok {
		if w, ok := m[key]; ok {
			return w
		}
	}
	return feedbackWords["en"][key]
}

func fbStatus(lang string, s Result) string {
	switch s {
	case Pass:
		return fbWord(lang, "pass")
	case Warn:
		return fbWord(lang, "warn")
	case Skipped:
		return fbWord(lang, "skipped")
	case Error:
		return fbWord(lang, "errorStatus")
	}
	return fbWord(lang, "fail")
}

// Feedback is what a student's feedback says, in the order it says it:
// the model behind feedback/<student>.md and the feedback sections of the
// class report (report.html), so both say the same.
type Feedback struct {
	Lang     string
	Lab      string
	Title    string // the lab's
	Student  string
	Score    float64
	Max      float64
	Graded   time.Time
	Duration time.Duration
	Outcome  GradeOutcome
	// BuildErrors are the compiler's first lines (build failures only).
	BuildErrors []string
	// Message says why the submission was not fully graded; unset for
	// build failures, whose BuildErrors say it.
	Message string
	// Policy names the grading policy applied (the lab's defaults when
	// the instructor gave none).
	Policy string
	// Tasks are the visible tasks, in the lab's order (the table).
	Tasks []FeedbackTask
	// Passed are the visible tasks that passed; Failed those that did not
	// and have something to say (a check ran, or a rule decided).
	Passed []FeedbackTask
	Failed []FeedbackTask
	// HiddenTasks and HiddenPoints count the tasks withheld.
	HiddenTasks  int
	HiddenPoints int
}

// FeedbackTask is one task as a student's feedback shows it.
type FeedbackTask struct {
	ID    string
	Title string
	// Hidden is set for a hidden task that is shown anyway (reveal).
	Hidden bool
	Score  float64
	Points int
	Status Result
	// Passed of Checks checks passed; Skipped more could not run here
	// (they neither earn nor cost points).
	Passed  int
	Checks  int
	Skipped int
	// Reason is set when a rule, not the count of checks, decided the score.
	Reason string
	// Verified: the task's checks ran; Hint and Evidence come from them.
	Verified bool
	Hint     string
	// Evidence are the checks worth showing: the warnings and skipped
	// checks of a task that passed, every check of one that did not.
	Evidence []*CheckResult
	// Headline is the first check that really failed (not one a failed
	// gate kept from running): why the task did not pass.
	Headline *CheckResult
}

// OutcomeText explains an outcome other than graded in one sentence
// ("" for graded).
func (f *Feedback) OutcomeText() string {
	switch f.Outcome {
	case OutcomeBuildFailed:
		return fbWord(f.Lang, "buildFailed")
	case OutcomeDeployFailed:
		return fbWord(f.Lang, "deployFailed")
	case OutcomeTimeout:
		return fbWord(f.Lang, "timeout")
	case OutcomeError:
		return fbWord(f.Lang, "error")
	}
	return ""
}

// HiddenText says how many tasks are withheld ("" when none).
func (f *Feedback) HiddenText() string {
	if f.HiddenTasks == 0 {
		return ""
	}
	return fmt.Sprintf(fbWord(f.Lang, "hiddenText"), f.HiddenTasks, FormatPoints(float64(f.HiddenPoints)))
}

// NewFeedback gathers a student's feedback. Tasks marked hidden count in
// the score but show nothing unless reveal is set.
func NewFeedback(g *Gradebook, s *GradedSubmission, reveal bool) *Feedback {
	f := &Feedback{Lang: g.Lang, Lab: g.Lab, Title: g.Title, Student: s.Student, Score: s.Score, Max: s.MaxPoints,
		Graded: s.Graded, Duration: time.Duration(s.Duration), Outcome: s.Outcome, Policy: g.Policy}
	if f.Policy == "" {
		f.Policy = fbWord(f.Lang, "defaultPolicy")
	}
	if s.Outcome == OutcomeBuildFailed {
		f.BuildErrors = s.BuildErrors
	} else {
		f.Message = s.Message
	}
	reportTask := map[string]*Task{}
	if s.Report != nil {
		for _, t := range s.Report.Tasks {
			reportTask[t.ID] = t
		}
	}
	for _, t := range g.Tasks {
		if t.Hidden && !reveal {
			f.HiddenTasks++
			f.HiddenPoints += t.Points
			continue
		}
		ts, _ := s.Task(t.ID)
		ft := FeedbackTask{ID: t.ID, Title: t.Title, Hidden: t.Hidden, Score: ts.Score, Points: t.Points, Status: ts.Status,
			Passed: ts.Passed, Checks: ts.Checks, Skipped: ts.Skipped, Reason: ts.Reason}
		rt := reportTask[t.ID]
		if rt != nil {
			ft.Verified, ft.Hint, ft.Headline = true, rt.Hint, rt.Headline()
		}
		f.Tasks = append(f.Tasks, ft)
		switch {
		case ts.Status.Passed():
			// Warnings, and checks that could not run (they cost nothing,
			// but the student should know what was not checked).
			if rt != nil {
				for _, c := range rt.Checks {
					if (c.Status == Warn || c.Status == Skipped) && !c.Hidden {
						ft.Evidence = append(ft.Evidence, c)
					}
				}
			}
			f.Passed = append(f.Passed, ft)
		case rt != nil || ts.Reason != "":
			if rt != nil {
				ft.Evidence = rt.Checks
			}
			f.Failed = append(f.Failed, ft)
		}
		// else: nothing to say beyond the table (no check ran)
	}
	return f
}

// WriteFeedbackMarkdown writes a student's feedback/<student>.md: the
// score, each task's result, and for what did not pass the evidence and
// the hint. Tasks marked hidden count in the score but show nothing unless
// reveal is set.
func WriteFeedbackMarkdown(w io.Writer, g *Gradebook, s *GradedSubmission, reveal bool) error {
	f := NewFeedback(g, s, reveal)
	lang := f.Lang
	var b strings.Builder
	fmt.Fprintf(&b, "# %s — %s: %s %s\n\n", f.Lab, mdInline(f.Title), fbWord(lang, "feedback"), mdInline(f.Student))
	fmt.Fprintf(&b, "**%s: %s / %s** · %s %s · %s\n\n", fbWord(lang, "score"), FormatPoints(f.Score), FormatPoints(f.Max),
		fbWord(lang, "graded"), f.Graded.UTC().Format(time.RFC3339), humantime.Duration(f.Duration, lang))

	switch f.Outcome {
	case OutcomeBuildFailed:
		fmt.Fprintf(&b, "%s\n\n", f.OutcomeText())
		writeFence(&b, "", strings.Join(f.BuildErrors, "\n"))
	case OutcomeDeployFailed, OutcomeTimeout, OutcomeError:
		fmt.Fprintf(&b, "> %s\n\n", f.OutcomeText())
	}
	fmt.Fprintf(&b, "%s: %s\n\n", fbWord(lang, "policy"), mdInline(f.Policy))
	if s.Built != "" {
		fmt.Fprintf(&b, "%s: %s\n\n", fbWord(lang, "built"), mdInline(s.Built))
	}
	if f.Message != "" {
		fmt.Fprintf(&b, "> %s\n\n", mdInline(f.Message))
	}

	// The table of tasks.
	fmt.Fprintf(&b, "| %s | %s | %s |\n|---|---:|---|\n", fbWord(lang, "task"), fbWord(lang, "points"), fbWord(lang, "result"))
	for _, t := range f.Tasks {
		result := Mark(t.Status) + " " + fbStatus(lang, t.Status)
		if t.Checks > 1 || t.Skipped > 0 {
			result += fmt.Sprintf(" (%d/%d %s", t.Passed, t.Checks, fbWord(lang, "checks"))
			if t.Skipped > 0 {
				result += fmt.Sprintf(", %d %s", t.Skipped, fbWord(lang, "skipped"))
			}
			result += ")"
		}
		fmt.Fprintf(&b, "| %s %s | %s / %d | %s |\n", t.ID, mdCell(t.Title), FormatPoints(t.Score), t.Points, result)
	}
	if f.HiddenTasks > 0 {
		fmt.Fprintf(&b, "| %s | — | %s |\n", fbWord(lang, "hidden"), fbWord(lang, "withheld"))
	}
	b.WriteString("\n")

	// What passed: one line per task.
	var passed []string
	for _, t := range f.Passed {
		line := fmt.Sprintf("- **%s** %s", t.ID, mdInline(t.Title))
		for _, c := range t.Evidence {
			line += fmt.Sprintf("\n  - %s %s — %s", Mark(c.Status), mdInline(c.Title), fbStatus(lang, c.Status))
			if c.Message != "" {
				line += ": " + mdInline(c.Message)
			}
		}
		passed = append(passed, line)
	}
	if len(passed) > 0 {
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", fbWord(lang, "passed"), strings.Join(passed, "\n"))
	}

	// What did not pass: each check with its evidence, then the hint.
	var failed strings.Builder
	for _, t := range f.Failed {
		fmt.Fprintf(&failed, "### %s %s (%s / %d)\n\n", t.ID, mdInline(t.Title), FormatPoints(t.Score), t.Points)
		if t.Reason != "" {
			fmt.Fprintf(&failed, "%s\n\n", mdInline(t.Reason))
		} else if h := t.Headline; h != nil && !h.Hidden {
			fmt.Fprintf(&failed, "**%s:** %s — %s\n\n", fbWord(lang, "why"), mdInline(h.Title), mdInline(h.Message))
		}
		if t.Verified {
			for _, c := range t.Evidence {
				writeFeedbackCheck(&failed, lang, c)
			}
			failed.WriteString("\n")
			if t.Hint != "" {
				fmt.Fprintf(&failed, "**%s:** %s\n\n", fbWord(lang, "hint"), mdInline(t.Hint))
			}
		}
	}
	if failed.Len() > 0 {
		fmt.Fprintf(&b, "## %s\n\n%s", fbWord(lang, "failed"), failed.String())
	}
	if f.HiddenTasks > 0 {
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", fbWord(lang, "hidden"), f.HiddenText())
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

func writeFeedbackCheck(b *strings.Builder, lang string, c *CheckResult) {
	if c.Hidden {
		fmt.Fprintf(b, "- %s *%s* — %s\n", Mark(c.Status), fbWord(lang, "hiddenCheck"), fbStatus(lang, c.Status))
		return
	}
	fmt.Fprintf(b, "- %s **%s** — %s", Mark(c.Status), mdInline(c.Title), fbStatus(lang, c.Status))
	if c.Message != "" && c.Status != Pass {
		fmt.Fprintf(b, ": %s", mdInline(c.Message))
	}
	b.WriteString("\n")
	if c.Status == Pass {
		return
	}
	field := func(key, val string) {
		if val != "" {
			fmt.Fprintf(b, "  - %s: %s\n", fbWord(lang, key), mdCode(val))
		}
	}
	field("expected", c.Expected)
	field("observed", c.Observed)
	for _, n := range c.Notes {
		fmt.Fprintf(b, "  - %s: %s\n", fbWord(lang, "note"), mdInline(n))
	}
	block := func(key, info, text string) {
		if strings.TrimSpace(text) == "" {
			return
		}
		fmt.Fprintf(b, "\n  <details><summary>%s</summary>\n\n", fbWord(lang, key))
		var inner strings.Builder
		writeFence(&inner, info, text)
		for _, l := range strings.Split(strings.TrimRight(inner.String(), "\n"), "\n") {
			b.WriteString("  " + l + "\n")
		}
		b.WriteString("\n  </details>\n")
	}
	block("object", "yaml", c.Object)
	block("events", "", strings.Join(c.Events, "\n"))
	block("logs", "", strings.Join(c.Logs, "\n"))
}

// writeFence writes text in a fenced code block whose fence is longer than
// any run of backticks inside it.
func writeFence(b *strings.Builder, info, text string) {
	text = Clean(text)
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	fmt.Fprintf(b, "%s%s\n%s\n%s\n\n", fence, info, strings.TrimRight(text, "\n"), fence)
}

// mdInline makes cluster text safe on one Markdown line: no control
// characters, no raw HTML.
func mdInline(s string) string {
	s = CleanLine(s)
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
}

// mdCell is mdInline for a table cell.
func mdCell(s string) string { return strings.ReplaceAll(mdInline(s), "|", `\|`) }

// mdCode shows a value as inline code.
func mdCode(s string) string {
	s = CleanLine(s)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return fence + pad + s + pad + fence
}
