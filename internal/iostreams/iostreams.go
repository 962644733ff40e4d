// Package iostreams holds the three standard streams together with what the
// terminal behind them can do (TTY, colour), so every command writes through
// one object and tests can run both terminal and piped output.
package iostreams

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"
	"github.com/muesli/termenv"
)

// IOStreams are the streams a command reads and writes.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	inTTY    bool
	outTTY   bool
	errTTY   bool
	color    bool
	Verbose  bool
	renderer *lipgloss.Renderer
}

// System returns the process's own streams, detecting TTY and honouring
// NO_COLOR, TERM=dumb and FORCE_COLOR.
func System() *IOStreams {
	s := &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	s.inTTY = term.IsTerminal(os.Stdin.Fd())
	s.outTTY = term.IsTerminal(os.Stdout.Fd())
	s.errTTY = term.IsTerminal(os.Stderr.Fd())
	s.color = colorWanted(s.outTTY, os.Getenv)
	s.initRenderer()
	return s
}

// colorWanted decides colour from the environment: NO_COLOR always wins;
// FORCE_COLOR (as GitHub Actions logs and other CI set it, any value but
// "0" or "false") turns it on where output is no terminal; otherwise a
// terminal that is not dumb gets colour.
func colorWanted(tty bool, getenv func(string) string) bool {
	if getenv("NO_COLOR") != "" {
		return false
	}
	if f := getenv("FORCE_COLOR"); f != "" && f != "0" && f != "false" {
		return true
	}
	return tty && getenv("TERM") != "dumb"
}

// Test returns streams backed by buffers. tty says whether they pretend to
// be a terminal (colour is then on too, unless NO_COLOR is set).
func Test(tty bool) (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	s := &IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut, inTTY: tty, outTTY: tty, errTTY: tty}
	s.color = tty && os.Getenv("NO_COLOR") == ""
	s.initRenderer()
	return s, out, errOut
}

func (s *IOStreams) initRenderer() {
	s.renderer = lipgloss.NewRenderer(s.Out)
	if s.color {
		s.renderer.SetColorProfile(termenv.ANSI256)
	} else {
		s.renderer.SetColorProfile(termenv.Ascii)
	}
}

// IsTTY reports whether standard output is a terminal.
func (s *IOStreams) IsTTY() bool { return s.outTTY }

// IsErrTTY reports whether standard error is a terminal (spinners go there).
func (s *IOStreams) IsErrTTY() bool { return s.errTTY }

// ColorEnabled reports whether styled output is allowed.
func (s *IOStreams) ColorEnabled() bool { return s.color }

// SetColor forces colour on or off (used by --no-color).
func (s *IOStreams) SetColor(on bool) {
	s.color = on
	s.initRenderer()
}

// Styles returns the palette for these streams; with colour off every style
// renders plain text.
func (s *IOStreams) Styles() Styles {
	r := s.renderer
	return Styles{
		Success: r.NewStyle().Foreground(lipgloss.Color("2")),
		Failure: r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		Warning: r.NewStyle().Foreground(lipgloss.Color("3")),
		Muted:   r.NewStyle().Foreground(lipgloss.Color("8")),
		Bold:    r.NewStyle().Bold(true),
		Title:   r.NewStyle().Bold(true).Underline(true),
	}
}

// Styles is the one place the project decides how things look.
type Styles struct {
	Success, Failure, Warning, Muted, Bold, Title lipgloss.Style
}

// PlainStyles is the palette with colour off: every style renders text
// unchanged. For output that is no terminal's whatever the streams are
// (files, values other programs read).
func PlainStyles() Styles {
	s := &IOStreams{Out: io.Discard}
	s.initRenderer()
	return s.Styles()
}

// CanPrompt reports whether a question can be asked: standard input and
// standard error are terminals (never in scripts or CI).
func (s *IOStreams) CanPrompt() bool { return s.inTTY && s.errTTY }

// Confirm asks a yes/no question on standard error and reads the answer
// from standard input; anything but y or yes is no.
func (s *IOStreams) Confirm(question string) bool {
	fmt.Fprintf(s.ErrOut, "%s [y/N] ", question)
	line, _ := bufio.NewReader(s.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}
