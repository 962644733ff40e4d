package iostreams

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTableAlignsStyledCellsOnATerminal(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	s, out, _ := Test(true)
	tab := s.NewTable("NAME", "STATE")
	tab.Row("etcd", s.Styles().Success.Render("ok"))
	tab.Row("kube-apiserver", s.Styles().Failure.Render("down"))
	require.NoError(t, tab.Print())
	lines := strings.Split(strings.TrimRight(stripANSI(out.String()), "\n"), "\n")
	require.Len(t, lines, 3)
	col := strings.Index(lines[0], "STATE")
	assert.Equal(t, col, strings.Index(lines[1], "ok"))
	assert.Equal(t, col, strings.Index(lines[2], "down"))
	assert.Contains(t, out.String(), "\x1b[")
}

func TestTableIsTabSeparatedWhenPiped(t *testing.T) {
	s, out, _ := Test(false)
	tab := s.NewTable("NAME", "STATE")
	tab.Row("etcd", s.Styles().Success.Render("ok"))
	require.NoError(t, tab.Print())
	assert.Equal(t, "etcd\tok\n", out.String(), "no header, no colour, tabs")
}

func TestStepPrintsOneLinePiped(t *testing.T) {
	s, _, errOut := Test(false)
	st := s.StartStep("Building")
	st.Update("3/5")
	st.Done("cache")
	assert.Regexp(t, `^✓ Building — cache \(\d+(\.\d+)?[mµn]?s\)\n$`, errOut.String())
}

func TestStepAnimatesOnATerminal(t *testing.T) {
	s, _, errOut := Test(true)
	st := s.StartStep("Building")
	st.Fail()
	assert.Contains(t, errOut.String(), "\r\x1b[K")
	assert.Contains(t, errOut.String(), "✗")
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && s[i] != 'm' {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
