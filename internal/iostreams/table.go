package iostreams

import (
	"fmt"
	"strings"
	"text/tabwriter"
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
	w := tabwriter.NewWriter(t.s.Out, 0, 4, 2, ' ', 0)
	head := make([]string, len(t.header))
	for i, h := range t.header {
		head[i] = t.s.Styles().Bold.Render(h)
	}
	fmt.Fprintln(w, strings.Join(head, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}
