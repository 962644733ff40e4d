package deploy

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/sandbox"
)

// In a box, a command that only compiles runs at the lowered priority
// and one that runs tests at the box's own: a test's waits must not
// starve behind other load on the machine. What test2json starts (as it
// starts a test binary) reports its nice value.
func TestBoxedGoLowersOnlyCompiles(t *testing.T) {
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip("no sandbox on this machine: " + sup.Reason)
	}
	root := t.TempDir()
	box, err := sandbox.NewBox(filepath.Join(root, "box"), sandbox.UIDFor(root), []string{root})
	require.NoError(t, err)
	src := filepath.Join(root, "src")
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/p\n\ngo 1.22\n"), 0o644))
	require.NoError(t, sandbox.CopyTree(context.Background(), src, box.Src(), sandbox.CopyLimits{}))
	own, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	require.NoError(t, err)
	// Linux's getpriority answers 20 - nice.
	ownNice := 20 - own
	niceOf := func(yield bool) int {
		t.Helper()
		var out bytes.Buffer
		_, err := BoxedGo{Box: box, Nice: 10}.Run(context.Background(), gobuild.Command{
			Dir:    box.Src(),
			Args:   []string{"tool", "test2json", "/bin/sh", "-c", "echo nice=$(cut -d')' -f2 /proc/$$/stat | cut -d' ' -f18)"},
			Yield:  yield,
			Stdout: &out,
		})
		require.NoError(t, err)
		m := regexp.MustCompile(`nice=(-?\d+)`).FindStringSubmatch(out.String())
		require.NotNil(t, m, out.String())
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, min(19, ownNice+10), niceOf(true), "a compile")
	assert.Equal(t, ownNice, niceOf(false), "a test run")
}
