//go:build linux

package checks

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/proc"
)

// What a go command leaves running when it ends (here a process in a
// session of its own, as envtest's etcd and kube-apiserver are in a
// group of their own, outliving a test binary that died) does not
// outlive goHere, nor what it left in its temporary directory.
func TestGoHereLeavesNothingRunning(t *testing.T) {
	bin := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pid")
	left := filepath.Join(t.TempDir(), "tmpdir")
	fakeGo := "#!/bin/sh\nsetsid sleep 300 >/dev/null 2>&1 &\necho $! > " + pidFile + "\nmkdir \"$TMPDIR/envtest-data\"\necho \"$TMPDIR\" > " + left + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	_, err := goHere(context.Background(), gobuild.Command{Args: []string{"test"}})
	require.NoError(t, err)
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !proc.Alive(pid) }, 5*time.Second, 10*time.Millisecond, "the orphan is killed")
	tmp, err := os.ReadFile(left)
	require.NoError(t, err)
	require.NoDirExists(t, strings.TrimSpace(string(tmp)), "what it wrote to TMPDIR is removed")
}
