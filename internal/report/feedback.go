package report

import (
	"fmt"
	"io"
	"strings"
	"time"
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
		"policy": "Grading policy", "defaultPolicy": "the lab's defaults", "hiddenCheck": "a hidden check",
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
		"policy": "Правила оценки", "defaultPolicy": "по умолчанию для лабораторной", "hiddenCheck": "скрытая проверка",
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

func fbStatus(lang string, s Status) string {
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

// WriteFeedbackMarkdown writes a student's feedback/<student>.md: the
// score, each task's result, and for what did not pass the evidence and
// the hint. Tasks marked hidden count in the score but show nothing unless
// reveal is set.
func WriteFeedbackMarkdown(w io.Writer, g *Gradebook, s *GradedSubmission, reveal bool) error {
	lang := g.Lang
	var b strings.Builder
	fmt.Fprintf(&b, "# %s — %s: %s %s\n\n", g.Lab, mdInline(g.Title), fbWord(lang, "feedback"), mdInline(s.Student))
	fmt.Fprintf(&b, "**%s: %s / %s** · %s %s · %s\n\n", fbWord(lang, "score"), FormatPoints(s.Score), FormatPoints(s.MaxPoints),
		fbWord(lang, "graded"), s.Graded.UTC().Format(time.RFC3339), time.Duration(s.Duration).Round(time.Second))

	switch s.Outcome {
	case OutcomeBuildFailed:
		fmt.Fprintf(&b, "%s\n\n", fbWord(lang, "buildFailed"))
		writeFence(&b, "", strings.Join(s.BuildErrors, "\n"))
	case OutcomeDeployFailed:
		fmt.Fprintf(&b, "> %s\n\n", fbWord(lang, "deployFailed"))
	case OutcomeTimeout:
		fmt.Fprintf(&b, "> %s\n\n", fbWord(lang, "timeout"))
	case OutcomeError:
		fmt.Fprintf(&b, "> %s\n\n", fbWord(lang, "error"))
	}
	policy := g.Policy
	if policy == "" {
		policy = fbWord(lang, "defaultPolicy")
	}
	fmt.Fprintf(&b, "%s: %s\n\n", fbWord(lang, "policy"), mdInline(policy))
	if s.Message != "" && s.Outcome != OutcomeBuildFailed {
		fmt.Fprintf(&b, "> %s\n\n", mdInline(s.Message))
	}

	hidden := func(t GradeTask) bool { return t.Hidden && !reveal }
	var reportTask = map[string]*Task{}
	if s.Report != nil {
		for _, t := range s.Report.Tasks {
			reportTask[t.ID] = t
		}
	}

	// The table of tasks.
	fmt.Fprintf(&b, "| %s | %s | %s |\n|---|---:|---|\n", fbWord(lang, "task"), fbWord(lang, "points"), fbWord(lang, "result"))
	hiddenCount, hiddenPoints := 0, 0
	for _, t := range g.Tasks {
		if hidden(t) {
			hiddenCount++
			hiddenPoints += t.Points
			continue
		}
		ts, _ := s.Task(t.ID)
		result := Mark(ts.Status) + " " + fbStatus(lang, ts.Status)
		if ts.Checks > 1 || ts.Skipped > 0 {
			result += fmt.Sprintf(" (%d/%d %s", ts.Passed, ts.Checks, fbWord(lang, "checks"))
			if ts.Skipped > 0 {
				result += fmt.Sprintf(", %d %s", ts.Skipped, fbWord(lang, "skipped"))
			}
			result += ")"
		}
		fmt.Fprintf(&b, "| %s %s | %s / %d | %s |\n", t.ID, mdCell(t.Title), FormatPoints(ts.Score), t.Points, result)
	}
	if hiddenCount > 0 {
		fmt.Fprintf(&b, "| %s | — | %s |\n", fbWord(lang, "hidden"), fbWord(lang, "withheld"))
	}
	b.WriteString("\n")

	// What passed: one line per task.
	var passed []string
	for _, t := range g.Tasks {
		if ts, _ := s.Task(t.ID); !hidden(t) && ts.Status.Passed() {
			line := fmt.Sprintf("- **%s** %s", t.ID, mdInline(t.Title))
			// Warnings, and checks that could not run (they cost nothing,
			// but the student should know what was not checked).
			if rt := reportTask[t.ID]; rt != nil {
				for _, c := range rt.Checks {
					if (c.Status == Warn || c.Status == Skipped) && !c.Hidden {
						line += fmt.Sprintf("\n  - %s %s — %s", Mark(c.Status), mdInline(c.Title), fbStatus(lang, c.Status))
						if c.Message != "" {
							line += ": " + mdInline(c.Message)
						}
					}
				}
			}
			passed = append(passed, line)
		}
	}
	if len(passed) > 0 {
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", fbWord(lang, "passed"), strings.Join(passed, "\n"))
	}

	// What did not pass: each check with its evidence, then the hint.
	var failed strings.Builder
	for _, t := range g.Tasks {
		ts, _ := s.Task(t.ID)
		rt := reportTask[t.ID]
		if hidden(t) || ts.Status.Passed() || (rt == nil && ts.Reason == "") {
			continue // nothing to say beyond the table (no check ran)
		}
		fmt.Fprintf(&failed, "### %s %s (%s / %d)\n\n", t.ID, mdInline(t.Title), FormatPoints(ts.Score), t.Points)
		if ts.Reason != "" {
			fmt.Fprintf(&failed, "%s\n\n", mdInline(ts.Reason))
		} else if h := headline(rt); h != nil && !h.Hidden {
			fmt.Fprintf(&failed, "**%s:** %s — %s\n\n", fbWord(lang, "why"), mdInline(h.Title), mdInline(h.Message))
		}
		if rt != nil {
			for _, c := range rt.Checks {
				writeFeedbackCheck(&failed, lang, c)
			}
			failed.WriteString("\n")
			if rt.Hint != "" {
				fmt.Fprintf(&failed, "**%s:** %s\n\n", fbWord(lang, "hint"), mdInline(rt.Hint))
			}
		}
	}
	if failed.Len() > 0 {
		fmt.Fprintf(&b, "## %s\n\n%s", fbWord(lang, "failed"), failed.String())
	}
	if hiddenCount > 0 {
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", fbWord(lang, "hidden"), fmt.Sprintf(fbWord(lang, "hiddenText"), hiddenCount, FormatPoints(float64(hiddenPoints))))
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

func headline(t *Task) *Check {
	if t == nil {
		return nil
	}
	return t.Headline()
}

func writeFeedbackCheck(b *strings.Builder, lang string, c *Check) {
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
