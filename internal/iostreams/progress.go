package iostreams

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Step is one long-running step of a command. On a terminal it animates a
// spinner with the elapsed time on stderr; piped, it prints one line when the
// step ends (and, with -v, one when it starts and one per detail change), so
// logs stay readable.
type Step struct {
	s       *IOStreams
	title   string
	started time.Time

	mu     sync.Mutex
	detail string
	loop   *Loop
	ended  bool
}

// StartStep begins a step titled title.
func (s *IOStreams) StartStep(title string) *Step {
	st := &Step{s: s, title: title, started: time.Now()}
	if s.errTTY {
		frame := 0
		st.loop = StartLoop(100*time.Millisecond, true, func() { st.paintSpinner(frame); frame++ },
			func() { fmt.Fprint(s.ErrOut, "\r\033[K") })
		return st
	}
	if s.Verbose {
		fmt.Fprintf(s.ErrOut, "• %s ...\n", title)
	}
	st.loop = StartLoop(ProgressEvery, false, st.heartbeat, nil)
	return st
}

// Update replaces the detail shown after the title (e.g. "3/5 packages").
func (st *Step) Update(format string, args ...any) {
	d := fmt.Sprintf(format, args...)
	st.mu.Lock()
	changed := d != st.detail
	st.detail = d
	st.mu.Unlock()
	if changed && !st.s.errTTY && st.s.Verbose {
		fmt.Fprintf(st.s.ErrOut, "  %s: %s\n", st.title, d)
	}
}

// Note prints a line that must stay on screen while the step goes on (why
// a fast path was not taken): above the spinner on a terminal, as a plain
// line otherwise.
func (st *Step) Note(line string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	clear := ""
	if st.s.errTTY {
		clear = "\r\033[K"
	}
	fmt.Fprintf(st.s.ErrOut, "%s  %s\n", clear, st.s.Styles().Warning.Render(line))
}

// ProgressEvery is how often a long step prints a line when stderr is not
// a terminal (a CI log, `2>file`): a 15-minute build must not look hung.
var ProgressEvery = 30 * time.Second

// heartbeat prints, every ProgressEvery while the step lasts, what it is
// doing and for how long; a short step prints nothing extra.
func (st *Step) heartbeat() {
	st.mu.Lock()
	line := "  " + st.title
	if st.detail != "" {
		line += " — " + st.detail
	}
	st.mu.Unlock()
	fmt.Fprintf(st.s.ErrOut, "%s (%s elapsed)\n", line, time.Since(st.started).Round(time.Second))
}

// paintSpinner redraws the step's line in place with spinner frame i.
func (st *Step) paintSpinner(i int) {
	st.mu.Lock()
	line := fmt.Sprintf("%s %s", spinnerFrames[i%len(spinnerFrames)], st.title)
	if st.detail != "" {
		line += " — " + st.detail
	}
	st.mu.Unlock()
	line += st.s.Styles().Muted.Render(fmt.Sprintf(" %.1fs", time.Since(st.started).Seconds()))
	fmt.Fprintf(st.s.ErrOut, "\r\033[K%s", line)
}

func (st *Step) end(mark, note string) {
	st.mu.Lock()
	if st.ended {
		st.mu.Unlock()
		return
	}
	st.ended = true
	st.mu.Unlock()
	st.loop.Stop()
	line := fmt.Sprintf("%s %s", mark, st.title)
	if note != "" {
		line += " — " + note
	}
	fmt.Fprintf(st.s.ErrOut, "%s%s\n", line, st.s.Styles().Muted.Render(fmt.Sprintf(" (%s)", roundDuration(time.Since(st.started)))))
}

// Done ends the step successfully; note is optional.
func (st *Step) Done(note ...string) {
	st.end(st.s.Styles().Success.Render("✓"), strings.Join(note, " "))
}

// Fail ends the step as failed. The error itself is printed by the caller.
func (st *Step) Fail() { st.end(st.s.Styles().Failure.Render("✗"), "") }

// Skip ends the step as not needed.
func (st *Step) Skip(why string) { st.end(st.s.Styles().Muted.Render("-"), why) }

func roundDuration(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
