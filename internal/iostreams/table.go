package iostreams

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// Table prints rows aligned on a terminal and as tab-separated values when
// piped, so scripts can cut columns (as cli/cli does).
type Table struct {
	s      *IOStreams
	header []string
	rows   [][]string
}

// NewTable starts a table with the given column headers.
func (s *IOStreams) NewTable(header ...string) *Table { return &Table{s: s, header: header} }

// Row adds a row; cells beyond the header are dropped.
func (t *Table) Row(cells ...string) { t.rows = append(t.rows, cells) }

// Print writes the table to Out.
func (t *Table) Print() error {
	if !t.s.outTTY {
		for _, r := range t.rows {
			if _, err := fmt.Fprintln(t.s.Out, strings.Join(r, "\t")); err != nil {
				return err
			}
		}
		return nil
	}
	// Pad by visible width before styling: escape codes would throw
	// tabwriter's column widths off.
	widths := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], lipgloss.Width(c))
			}
		}
	}
	line := func(cells []string, style func(string) string) error {
		var b strings.Builder
		for i, c := range cells {
			if i >= len(widths) {
				break
			}
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-lipgloss.Width(c))
			if i == len(cells)-1 || i == len(widths)-1 {
				pad = ""
			}
			b.WriteString(style(c) + pad)
		}
		_, err := fmt.Fprintln(t.s.Out, b.String())
		return err
	}
	bold := t.s.Styles().Bold
	if err := line(t.header, func(c string) string { return bold.Render(c) }); err != nil {
		return err
	}
	for _, r := range t.rows {
		if err := line(r, func(c string) string { return c }); err != nil {
			return err
		}
	}
	return nil
}
