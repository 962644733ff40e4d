package iostreams

import (
	"strings"
	"testing"
	"time"

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

// lines sends each write on a channel, so a test waits for output instead
// of sleeping.
type lines chan string

func (l lines) Write(p []byte) (int, error) { l <- string(p); return len(p), nil }

// Piped, a long step (the control-plane build) says every ProgressEvery
// what it does and for how long, so a CI log does not look hung.
func TestLongStepPrintsProgressWhenPiped(t *testing.T) {
	defer func(d time.Duration) { ProgressEvery = d }(ProgressEvery)
	ProgressEvery = 20 * time.Millisecond
	s, _, _ := Test(false)
	got := make(lines, 16)
	s.ErrOut = got
	step := s.StartStep("Building the control plane")
	step.Update("412/1280 packages")
	select {
	case line := <-got:
		assert.Regexp(t, `^  Building the control plane — 412/1280 packages \(\d+s elapsed\)\n$`, line)
	case <-time.After(30 * time.Second):
		t.Fatal("no progress line")
	}
	go func() {
		for range got { // keep draining until Done's line
		}
	}()
	step.Done()
	close(got)
}

func TestStepNoteStaysAsALine(t *testing.T) {
	s, _, errOut := Test(false)
	st := s.StartStep("Control-plane binaries")
	st.Note("download of etcd v3.7.3 failed (404 Not Found): building instead")
	st.Done("built")
	lines := strings.Split(strings.TrimRight(errOut.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, "  download of etcd v3.7.3 failed (404 Not Found): building instead", lines[0])
	assert.Contains(t, lines[1], "Control-plane binaries — built")
}
