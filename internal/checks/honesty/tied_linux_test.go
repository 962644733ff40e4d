package honesty_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/proc"
)

// tieToTest makes cmd die with the test binary: when `go test -timeout`
// kills the binary, no busy process is left burning the machine's cores.
func tieToTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// TestBurnCPUDiesWithTheTestBinary runs burnCPU in a child test binary,
// kills that binary the way `go test -timeout` ends it (no cleanup runs)
// and expects the busy process gone with it.
func TestBurnCPUDiesWithTheTestBinary(t *testing.T) {
	if os.Getenv("LABCTL_BURN_HELPER") == "1" {
		burnCPU(t, 1)
		fmt.Println("burning")
		select {} // until killed
	}
	child := exec.Command(os.Args[0], "-test.short", "-test.run=^TestBurnCPUDiesWithTheTestBinary$")
	child.Env = append(os.Environ(), "LABCTL_BURN_HELPER=1")
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the child test binary did not start its busy process")
	require.Equal(t, "burning\n", line)

	busy := childrenOf(t, child.Process.Pid)
	require.Len(t, busy, 1, "the child should run exactly one busy process")
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()
	require.Eventually(t, func() bool { return !proc.Alive(busy[0]) }, 10*time.Second, 20*time.Millisecond,
		"the busy process %d outlived the killed test binary", busy[0])
}

// childrenOf lists the pids whose parent is pid (from /proc/<pid>/task/*/children).
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	require.NoError(t, err)
	var pids []int
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, field := range strings.Fields(string(raw)) {
			n, err := strconv.Atoi(field)
			require.NoError(t, err)
			pids = append(pids, n)
		}
	}
	return pids
}
