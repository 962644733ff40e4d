package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// JUnit XML of a gradebook: one test suite per student, one test case per
// task; the score is a property of the suite. It is for the instructor's
// CI, so hidden tasks are included.
// WriteGradebookJUnit writes junit.xml for a gradebook.
func WriteGradebookJUnit(w io.Writer, g *Gradebook) error {
	all := junitSuites{Name: "labctl grade " + g.Lab}
	for _, s := range g.Submissions {
		suite := junitSuite{
			Name:      s.Student,
			Time:      fmt.Sprintf("%.3f", time.Duration(s.Duration).Seconds()),
			Timestamp: s.Graded.UTC().Format(time.RFC3339),
			Properties: []junitProperty{
				{Name: "score", Value: FormatPoints(s.Score)},
				{Name: "max", Value: FormatPoints(s.MaxPoints)},
				{Name: "outcome", Value: string(s.Outcome)},
				{Name: "source", Value: junitText(s.Source)},
			},
		}
		if s.Commit != "" {
			suite.Properties = append(suite.Properties, junitProperty{Name: "commit", Value: s.Commit})
		}
		tasks := map[string]*Task{}
		if s.Report != nil {
			for _, t := range s.Report.Tasks {
				tasks[t.ID] = t
			}
		}
		for _, gt := range g.Tasks {
			ts, _ := s.Task(gt.ID)
			name := fmt.Sprintf("%s %s (%s/%d)", gt.ID, junitText(gt.Title), FormatPoints(ts.Score), gt.Points)
			if gt.Hidden {
				name += " [hidden]"
			}
			jc := junitCase{Name: name, Classname: g.Lab + "." + s.Student, Time: "0.000"}
			var text strings.Builder
			first := ""
			if rt := tasks[gt.ID]; rt != nil {
				var d time.Duration
				for _, c := range rt.Checks {
					d += time.Duration(c.Duration)
					fmt.Fprintf(&text, "%s %s (%s): %s\n", Mark(c.Status), junitText(c.Title), c.ID, junitText(CleanLine(c.Message)))
					if c.Expected != "" {
						fmt.Fprintf(&text, "  expected: %s\n", junitText(CleanLine(c.Expected)))
					}
					if c.Observed != "" {
						fmt.Fprintf(&text, "  observed: %s\n", junitText(CleanLine(c.Observed)))
					}
					if first == "" && !c.Status.Passed() && c.Status != Skipped {
						first = junitText(CleanLine(c.Message))
					}
				}
				jc.Time = fmt.Sprintf("%.3f", d.Seconds())
			}
			if ts.Reason != "" {
				fmt.Fprintf(&text, "%s\n", junitText(ts.Reason))
			}
			switch {
			case s.Outcome == OutcomeBuildFailed || s.Outcome == OutcomeDeployFailed:
				jc.Error = &junitMessage{Type: string(s.Outcome), Message: junitText(s.Message), Text: junitText(strings.Join(s.BuildErrors, "\n"))}
				suite.Errors++
			case s.Outcome == OutcomeError && s.Report == nil:
				jc.Error = &junitMessage{Type: string(s.Outcome), Message: junitText(s.Message)}
				suite.Errors++
			case ts.Status == Fail:
				if first == "" {
					first = "failed"
				}
				jc.Failure = &junitMessage{Type: "fail", Message: first, Text: text.String()}
				suite.Failures++
			case ts.Status == Error:
				if first == "" {
					first = "could not be checked"
				}
				jc.Error = &junitMessage{Type: "error", Message: first, Text: text.String()}
				suite.Errors++
			case ts.Status == Skipped:
				msg := "no check of this task ran"
				if ts.Reason != "" { // e.g. which gate stopped it
					msg = ts.Reason
				}
				jc.Skipped = &junitMessage{Message: msg, Text: text.String()}
				suite.Skipped++
			default:
				jc.SystemOut = text.String()
			}
			suite.Cases = append(suite.Cases, jc)
		}
		suite.Tests = len(suite.Cases)
		all.Tests += suite.Tests
		all.Failures += suite.Failures
		all.Errors += suite.Errors
		all.Suites = append(all.Suites, suite)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// junitText drops what XML 1.0 cannot carry, on top of Clean.
func junitText(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || (r >= 0x20 && r != 0xFFFE && r != 0xFFFF) {
			return r
		}
		return -1
	}, Clean(s))
}
