package grade

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// progress shows where each submission is. On a terminal (stderr) it is a
// table redrawn in place several times a second; piped, one line per
// change of stage, so a log stays readable.
type progress struct {
	s    *iostreams.IOStreams
	live bool

	mu      sync.Mutex
	rows    []*progressRow
	byID    map[string]*progressRow
	drawn   int
	started time.Time
	loop    *iostreams.Loop
}

type progressRow struct {
	student string
	stage   string
	detail  string
	since   time.Time // when grading it began
	took    time.Duration
	result  string
	ok      bool
	ended   bool
}

func newProgress(s *iostreams.IOStreams, subs []Submission) *progress {
	p := &progress{s: s, live: s.IsErrTTY(), byID: map[string]*progressRow{}, started: time.Now()}
	for _, sub := range subs {
		r := &progressRow{student: sub.Student, stage: "queued"}
		p.rows = append(p.rows, r)
		p.byID[sub.Student] = r
	}
	if p.live {
		p.loop = iostreams.StartLoop(250*time.Millisecond, true, p.draw, p.draw)
	}
	return p
}

// set moves a submission to a stage (detail: what it is doing in it).
func (p *progress) set(student, stage, detail string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.byID[student]
	if r == nil || r.ended {
		return
	}
	if r.since.IsZero() {
		r.since = time.Now()
	}
	changed := r.stage != stage
	r.stage, r.detail = stage, detail
	if changed && !p.live {
		fmt.Fprintf(p.s.ErrOut, "%s: %s\n", student, stage)
	}
}

// detail changes what a submission is doing within its stage.
func (p *progress) detail(student, detail string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.byID[student]; r != nil && !r.ended {
		r.detail = detail
	}
}

// finish ends a submission's row with its result.
func (p *progress) finish(student, result string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.byID[student]
	if r == nil || r.ended {
		return
	}
	r.ended, r.result, r.ok = true, result, ok
	if !r.since.IsZero() {
		r.took = time.Since(r.since)
	}
	r.stage = "done"
	if !p.live {
		fmt.Fprintf(p.s.ErrOut, "%s: %s (%s)\n", student, result, r.took.Round(100*time.Millisecond))
	}
}

// stop ends the display, leaving the final table on screen.
func (p *progress) stop() {
	if p.loop != nil {
		p.loop.Stop()
	}
}

// draw rewrites the table in place: up over the lines drawn last time,
// clear to the end of the screen, print again.
func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.s.Styles()
	width := len("STUDENT")
	for _, r := range p.rows {
		width = max(width, len(r.student))
	}
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\033[%dA", p.drawn)
	}
	b.WriteString("\r\033[J")
	fmt.Fprintf(&b, "%s\n", st.Bold.Render(fmt.Sprintf("%-*s  %-13s  %7s  %s", width, "STUDENT", "STAGE", "TIME", "RESULT")))
	running, finished := 0, 0
	for _, r := range p.rows {
		var took time.Duration
		switch {
		case r.ended:
			took = r.took
			finished++
		case !r.since.IsZero():
			took = time.Since(r.since)
			running++
		}
		tookText := ""
		if took > 0 {
			tookText = fmt.Sprintf("%.0fs", took.Seconds())
		}
		result := r.detail
		stage := fmt.Sprintf("%-13s", r.stage)
		switch {
		case r.ended && r.ok:
			result = st.Success.Render(r.result)
		case r.ended:
			result = st.Failure.Render(r.result)
		case r.since.IsZero():
			stage = st.Muted.Render(stage)
		}
		fmt.Fprintf(&b, "%-*s  %s  %7s  %s\n", width, r.student, stage, tookText, result)
	}
	fmt.Fprintf(&b, "%s\n", st.Muted.Render(fmt.Sprintf("%d/%d done, %d running, %s", finished, len(p.rows), running, time.Since(p.started).Round(time.Second))))
	p.drawn = len(p.rows) + 2
	fmt.Fprint(p.s.ErrOut, b.String())
}

// printSummary prints the results of this run as a table on stdout
// (aligned on a terminal, tab-separated when piped).
func printSummary(s *iostreams.IOStreams, lab *labs.Lab, results []*report.GradedSubmission, outDir string) {
	t := s.NewTable("STUDENT", "SCORE", "MAX", "OUTCOME", "TIME", "NOTE")
	n := 0
	for _, r := range results {
		if r == nil {
			continue
		}
		n++
		t.Row(r.Student, report.FormatPoints(r.Score), report.FormatPoints(r.MaxPoints), string(r.Outcome),
			time.Duration(r.Duration).Round(100*time.Millisecond).String(), report.CleanLine(r.Message))
	}
	if n == 0 {
		return
	}
	_ = t.Print()
	fmt.Fprintf(s.ErrOut, "Wrote %s, %s, %s, %s and %s/ in %s (lab %s).\n", ReportFile, GradebookFile, ResultsFile, JUnitFile, FeedbackDir, outDir, lab.ID)
}

// stageReporter hears where a submission's grading is: the progress
// display in the grader, a pipe to it in a submission's box.
type stageReporter interface {
	set(student, stage, detail string)
	detail(student, detail string)
}
