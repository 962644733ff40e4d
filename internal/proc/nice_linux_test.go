package proc

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReniceReachesTheProcessesStartedAfter renices a shell, lets it start
// a child and reads the child's nice value from /proc: a build's compilers
// are started after the go command is reniced.
func TestReniceReachesTheProcessesStartedAfter(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read _; sleep 30 & echo $!; wait")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	Renice(cmd.Process.Pid, 7)
	_, err = stdin.Write([]byte("go\n"))
	require.NoError(t, err)
	child, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	child = strings.TrimSpace(child)
	t.Cleanup(func() { _ = exec.Command("kill", child).Run() })

	raw, err := os.ReadFile("/proc/" + child + "/stat")
	require.NoError(t, err)
	// The fields after the command name (which ends at the last ')'):
	// state is field 3, nice field 19.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	require.Equal(t, "7", fields[19-3])
}
