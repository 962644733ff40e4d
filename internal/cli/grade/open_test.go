package grade

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
)

func TestOpenReport(t *testing.T) {
	s, _, stderr := iostreams.Test(false)
	var opened []string
	o := &Options{f: &cmdutil.Factory{IOStreams: s}, Opener: func(path string) error { opened = append(opened, path); return nil }}

	// Nothing graded into the directory: nothing to open, one line.
	dir := t.TempDir()
	openReport(o, dir)
	require.Empty(t, opened)
	require.Equal(t, "No report.html to open: no submission was graded into "+dir+".\n", stderr.String())

	// The report is opened by its absolute path.
	require.NoError(t, os.WriteFile(filepath.Join(dir, grade.ReportFile), []byte("<!DOCTYPE html>"), 0o644))
	stderr.Reset()
	openReport(o, dir)
	require.Equal(t, []string{filepath.Join(dir, grade.ReportFile)}, opened)
	require.Contains(t, stderr.String(), "Opened ")

	// No browser here: one line that says where the report is.
	for _, err := range []error{errNoOpener, errors.New("xdg-open: exit status 3")} {
		o.Opener = func(string) error { return err }
		stderr.Reset()
		openReport(o, dir)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), stderr.String())
		require.Contains(t, stderr.String(), "open "+filepath.Join(dir, grade.ReportFile)+" in a browser")
	}
}

func TestSystemOpener(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("xdg-open is the opener on Linux")
	}
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	require.ErrorIs(t, SystemOpener("/x/report.html"), errNoOpener)

	// A stand-in xdg-open that records what it was asked to open.
	got := filepath.Join(t.TempDir(), "opened")
	script := "#!/bin/sh\necho \"$1\" > " + got + "\nexit ${FAIL:-0}\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755))
	require.NoError(t, SystemOpener("/x/report.html"))
	raw, err := os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, "/x/report.html\n", string(raw))
	t.Setenv("FAIL", "3")
	require.ErrorContains(t, SystemOpener("/x/report.html"), "xdg-open: exit status 3")
}
