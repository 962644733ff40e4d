package report

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/iostreams"
)

// Formats accepted by Write.
const (
	FormatTable = "table" // styled on a terminal, plain when piped
	FormatJSON  = "json"
	FormatJUnit = "junit"
)

// Formats lists the -o values.
var Formats = []string{FormatTable, FormatJSON, FormatJUnit}

// Write renders the report to s.Out in a format. Verbose shows the checks
// of passed tasks too.
func Write(s *iostreams.IOStreams, r *Report, format string) error {
	switch format {
	case FormatJSON:
		return WriteJSON(s.Out, r)
	case FormatJUnit:
		return WriteJUnit(s.Out, r)
	case FormatTable, "":
		return WriteText(s.Out, s.Styles(), r, s.Verbose)
	}
	return fmt.Errorf("unknown output format %q (use %s)", format, strings.Join(Formats, ", "))
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// labels are the fixed words of the text report.
var labels = map[string]map[string]string{
	"en": {
		"expected": "expected", "observed": "observed", "object": "last observed", "events": "events",
		"logs": "operator log", "hint": "hint", "notes": "note", "namespace": "namespace",
		"tasks": "tasks passed", "points": "points", "warnings": "with warnings", "withheld": "details withheld",
		"skipped": "skipped", "errors": "could not decide", "failed": "failed", "operator": "operator",
		"see": "see task",
	},
	"ru": {
		"expected": "ожидалось", "observed": "наблюдалось", "object": "последнее состояние", "events": "события",
		"logs": "журнал оператора", "hint": "подсказка", "notes": "примечание", "namespace": "пространство имён",
		"tasks": "задач пройдено", "points": "баллов", "warnings": "с предупреждениями", "withheld": "подробности скрыты",
		"skipped": "пропущено", "errors": "не удалось проверить", "failed": "не пройдено", "operator": "оператор",
		"see": "см. задачу",
	},
}

func label(lang, key string) string {
	if m, ok := labels[lang]; ok {
		return m[key]
	}
	return labels["en"][key]
}

// Mark is the one-character symbol of a status.
func Mark(s Result) string {
	switch s {
	case Pass:
		return "✓"
	case Warn:
		return "!"
	case Skipped:
		return "-"
	case Error:
		return "?"
	}
	return "✗"
}

func styled(st iostreams.Styles, s Result, text string) string {
	switch s {
	case Pass:
		return st.Success.Render(text)
	case Warn:
		return st.Warning.Render(text)
	case Skipped:
		return st.Muted.Render(text)
	case Error:
		return st.Warning.Render(text)
	}
	return st.Failure.Render(text)
}

// WriteText writes the human report: one line per task; for tasks that did
// not pass, each check with its evidence and the task's hint. With colour
// off (piped output) it is plain text.
func WriteText(w io.Writer, st iostreams.Styles, r *Report, verbose bool) error {
	lang := r.Lang
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s\n", st.Bold.Render(r.Lab), st.Title.Render(Clean(r.Title)))
	var meta []string
	if r.Namespace != "" {
		meta = append(meta, label(lang, "namespace")+" "+r.Namespace)
	}
	if r.Operator != "" {
		op := label(lang, "operator") + " " + CleanLine(r.Operator)
		if r.OperatorProject != "" {
			op += " (" + CleanLine(r.OperatorProject) + ")"
		}
		meta = append(meta, op)
	}
	meta = append(meta, r.Duration.String())
	fmt.Fprintln(&b, st.Muted.Render(strings.Join(meta, " · ")))
	fmt.Fprintln(&b)

	shown := map[string]string{} // check ID -> the task under which its evidence was printed
	for _, t := range r.Tasks {
		writeTask(&b, st, lang, t, verbose, shown)
	}
	fmt.Fprintln(&b)
	sum := r.Summary
	line := fmt.Sprintf("%d/%d %s · %d/%d %s", sum.Passed, sum.Tasks, label(lang, "tasks"), sum.Points, sum.MaxPoints, label(lang, "points"))
	if sum.Warned > 0 {
		line += fmt.Sprintf(" · %d %s", sum.Warned, label(lang, "warnings"))
	}
	if sum.Failed > 0 {
		line += fmt.Sprintf(" · %d %s", sum.Failed, label(lang, "failed"))
	}
	if sum.Errors > 0 {
		line += fmt.Sprintf(" · %d %s", sum.Errors, label(lang, "errors"))
	}
	if sum.Skipped > 0 {
		line += fmt.Sprintf(" · %d %s", sum.Skipped, label(lang, "skipped"))
	}
	fmt.Fprintln(&b, styled(st, r.Status, line))
	for _, n := range r.Notes {
		fmt.Fprintln(&b, st.Muted.Render(CleanLine(n)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTaskText writes one task as the text report shows it: its line and,
// when it did not pass (or only with a warning), each check with its
// evidence and the task's hint. Hidden tasks keep their evidence withheld
// unless verbose. Other formats that carry one task's feedback (GitHub
// Classroom's test messages) use it so students read the same words.
func WriteTaskText(w io.Writer, st iostreams.Styles, lang string, t *Task, verbose bool) error {
	var b strings.Builder
	writeTask(&b, st, lang, t, verbose, map[string]string{})
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTask writes a task; shown remembers under which task a shared
// check's evidence was already printed, so it is printed once.
func writeTask(b *strings.Builder, st iostreams.Styles, lang string, t *Task, verbose bool, shown map[string]string) {
	fmt.Fprintf(b, "%s %-7s %s  %s\n", styled(st, t.Status, Mark(t.Status)), t.ID, CleanLine(t.Title),
		st.Muted.Render(fmt.Sprintf("%d/%d", t.Score, t.Points)))
	show := verbose || !t.Status.Passed() || t.Status == Warn
	if !show {
		return
	}
	if t.Hidden && !verbose {
		fmt.Fprintf(b, "    %s\n", st.Muted.Render("("+label(lang, "withheld")+")"))
		return
	}
	for _, c := range t.Checks {
		if !verbose && c.Status == Pass {
			continue
		}
		if first, ok := shown[c.ID]; ok {
			fmt.Fprintf(b, "    %s %s  %s\n", styled(st, c.Status, Mark(c.Status)), CleanLine(c.Title),
				st.Muted.Render(fmt.Sprintf("%s · %s %s", c.ID, label(lang, "see"), first)))
			continue
		}
		shown[c.ID] = t.ID
		writeCheck(b, st, lang, c)
	}
	if (t.Status == Fail || t.Status == Error) && t.Hint != "" {
		fmt.Fprintf(b, "    %s %s\n", st.Bold.Render(label(lang, "hint")+":"), CleanLine(t.Hint))
	}
}

func writeCheck(b *strings.Builder, st iostreams.Styles, lang string, c *CheckResult) {
	fmt.Fprintf(b, "    %s %s  %s\n", styled(st, c.Status, Mark(c.Status)), CleanLine(c.Title), st.Muted.Render(c.ID+" · "+c.Duration.String()))
	indent := "        "
	if c.Message != "" {
		fmt.Fprintf(b, "%s%s\n", indent, CleanLine(c.Message))
	}
	field := func(key, val string) {
		if val != "" {
			fmt.Fprintf(b, "%s%s %s\n", indent, st.Bold.Render(label(lang, key)+":"), CleanLine(val))
		}
	}
	field("expected", c.Expected)
	field("observed", c.Observed)
	for _, n := range c.Notes {
		field("notes", n)
	}
	block := func(key string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(b, "%s%s\n", indent, st.Bold.Render(label(lang, key)+":"))
		for _, l := range lines {
			fmt.Fprintf(b, "%s  %s\n", indent, st.Muted.Render(Clean(l)))
		}
	}
	if c.Object != "" {
		block("object", strings.Split(c.Object, "\n"))
	}
	block("events", c.Events)
	block("logs", c.Logs)
}

// JUnit XML: one test suite per report, one test case per task; a task's
// checks are the failure's text.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr,omitempty"`
	Tests    int          `xml:"tests,attr,omitempty"`
	Failures int          `xml:"failures,attr,omitempty"`
	Errors   int          `xml:"errors,attr,omitempty"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string `xml:"name,attr"`
	Tests     int    `xml:"tests,attr"`
	Failures  int    `xml:"failures,attr"`
	Errors    int    `xml:"errors,attr"`
	Skipped   int    `xml:"skipped,attr"`
	Time      string `xml:"time,attr"`
	Timestamp string `xml:"timestamp,attr"`
	// Properties carry grading facts (student, score) in a gradebook.
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML.
func WriteJUnit(w io.Writer, r *Report) error {
	suite := junitSuite{
		Name:      r.Lab,
		Tests:     len(r.Tasks),
		Failures:  r.Summary.Failed,
		Errors:    r.Summary.Errors,
		Skipped:   r.Summary.Skipped,
		Time:      seconds(time.Duration(r.Duration)),
		Timestamp: r.Started.UTC().Format(time.RFC3339),
	}
	for _, t := range r.Tasks {
		var d time.Duration
		for _, c := range t.Checks {
			d += time.Duration(c.Duration)
		}
		jc := junitCase{Name: t.ID + " " + xmlSafe(t.Title), Classname: r.Lab, Time: seconds(d)}
		var text strings.Builder
		var first string
		for _, c := range t.Checks {
			fmt.Fprintf(&text, "%s %s (%s): %s\n", Mark(c.Status), xmlSafe(c.Title), c.ID, xmlSafe(c.Message))
			if c.Expected != "" {
				fmt.Fprintf(&text, "  expected: %s\n", xmlSafe(c.Expected))
			}
			if c.Observed != "" {
				fmt.Fprintf(&text, "  observed: %s\n", xmlSafe(c.Observed))
			}
			for _, n := range c.Notes {
				fmt.Fprintf(&text, "  note: %s\n", xmlSafe(n))
			}
			if c.Status != Pass && !t.Hidden {
				for _, l := range c.Events {
					fmt.Fprintf(&text, "  event: %s\n", xmlSafe(l))
				}
				for _, l := range c.Logs {
					fmt.Fprintf(&text, "  log: %s\n", xmlSafe(l))
				}
			}
		}
		if t.Hint != "" && !t.Status.Passed() {
			fmt.Fprintf(&text, "hint: %s\n", xmlSafe(t.Hint))
		}
		if h := t.Headline(); h != nil {
			first = xmlSafe(CleanLine(h.Message))
		}
		msg := &junitMessage{Message: first, Text: text.String()}
		switch t.Status {
		case Fail:
			msg.Type = "fail"
			jc.Failure = msg
		case Error:
			msg.Type = "error"
			jc.Error = msg
		case Skipped:
			msg.Message = "all checks of this task were skipped"
			jc.Skipped = msg
		default:
			jc.SystemOut = text.String()
		}
		suite.Cases = append(suite.Cases, jc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{suite}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// xmlSafe drops what XML 1.0 cannot carry at all (most control
// characters), on top of Clean.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || (r >= 0x20 && r != 0xFFFE && r != 0xFFFF) {
			return r
		}
		return -1
	}, Clean(s))
}
