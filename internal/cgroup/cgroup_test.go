//go:build linux

package cgroup_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cgroup"
	"github.com/labctl/labctl/internal/cgroup/cgrouptest"
	"github.com/labctl/labctl/internal/proc"
)

// childEnv selects what the test binary does when started in a group.
const childEnv = "LABCTL_CGROUP_TEST_CHILD"

func TestMain(m *testing.M) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		os.Exit(m.Run())
	}
	// Like a box: nothing happens before the parent says go (on v1 it
	// moves this process into the group first).
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	cgrouptest.Attack(mode)
}

func needCgroups(t *testing.T) cgroup.Support {
	t.Helper()
	s := cgroup.Detect()
	if s.Version == 0 {
		t.Skip(s.Reason)
	}
	return s
}

// startIn starts the test binary in mode inside g, the way a box is
// started: inside at once (v2), or moved in before it is told to go (v1).
func startIn(t *testing.T, g cgroup.Group, mode string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	release, inside, err := g.StartInside(cmd.SysProcAttr)
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	release()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if !inside {
		require.NoError(t, g.Add(cmd.Process.Pid))
	}
	_, err = io.WriteString(stdin, "go\n")
	require.NoError(t, err)
	return cmd, bufio.NewReader(stdout)
}

func TestDetectFindsTheMachinesHierarchy(t *testing.T) {
	s := needCgroups(t)
	t.Logf("%s", s)
	assert.NotEmpty(t, s.Controllers)
	assert.Contains(t, []int{1, 2}, s.Version)
}

// A fork bomb stops at the pids limit, its processes die with the group,
// and the group is gone afterwards.
func TestForkBombStopsAtPidsLimit(t *testing.T) {
	if !needCgroups(t).Has("pids") {
		t.Skip("no pids controller")
	}
	g, err := cgroup.New(fmt.Sprintf("test-forkbomb-%d", os.Getpid()), cgroup.Limits{Pids: 64})
	require.NoError(t, err)
	dir := g.Path()
	t.Cleanup(func() { _ = g.Remove() })

	_, out := startIn(t, g, "forkbomb")
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	t.Log(strings.TrimSpace(line))
	var n int
	_, err = fmt.Sscanf(line, "forked %d,", &n)
	require.NoError(t, err, line)
	assert.Less(t, n, 64, "the limit counts the bomb's threads and processes together")
	assert.Contains(t, line, "resource temporarily unavailable", "fork failed for the limit")

	pids := cgroup.Pids(dir)
	assert.GreaterOrEqual(t, len(pids), n, "the forked processes are in the group")
	require.NoError(t, g.Remove())
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "the group is gone")
	for _, pid := range pids {
		assert.False(t, proc.Alive(pid), "process %d outlived its group", pid)
	}
}

// Memory beyond the limit is killed in the group only: the test process
// (outside it) goes on.
func TestMemoryHogIsKilledInItsGroupOnly(t *testing.T) {
	if !needCgroups(t).Has("memory") {
		t.Skip("no memory controller")
	}
	g, err := cgroup.New(fmt.Sprintf("test-hog-%d", os.Getpid()), cgroup.Limits{Memory: 96 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Remove() })

	cmd, out := startIn(t, g, "hog")
	last := ""
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			break
		}
		last = strings.TrimSpace(line)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the hog ended by a signal, after %q", last)
	ws := exit.Sys().(syscall.WaitStatus)
	assert.Equal(t, syscall.SIGKILL, ws.Signal(), "killed by the OOM killer after %q", last)
	assert.GreaterOrEqual(t, g.OOMKills(), 1)
	held, _ := strconv.Atoi(strings.Fields(last + " 0 0")[1])
	assert.Less(t, held, 96, "it never held more than the limit")
	require.NoError(t, g.Remove())
}

func TestNameKeepsWhatACgroupAllows(t *testing.T) {
	assert.Equal(t, "box-alice_smith-1a2b", cgroup.Name("box-alice smith-1a2b"))
	assert.Equal(t, "g..", cgroup.Name(".."))
	assert.Equal(t, "g", cgroup.Name(""))
	assert.Len(t, cgroup.Name(strings.Repeat("x", 200)), 64)
	assert.Equal(t, "a_b", cgroup.Name("a/b"))
}
