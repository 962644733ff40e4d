package proc

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A busy child counts towards its parent's tree; an idle one does not
// make the tree busy.
func TestTreeCPUCountsDescendants(t *testing.T) {
	sh := exec.Command("sh", "-c", "sh -c 'while :; do :; done' & sleep 30")
	require.NoError(t, sh.Start())
	t.Cleanup(func() {
		_ = exec.Command("pkill", "-P", itoa(sh.Process.Pid)).Run()
		_ = sh.Process.Kill()
		_ = sh.Wait()
	})
	before, err := TreeCPU(sh.Process.Pid)
	require.NoError(t, err)
	// However busy the machine, the spinning grandchild gets some CPU.
	require.Eventually(t, func() bool {
		after, err := TreeCPU(sh.Process.Pid)
		return err == nil && after-before >= 50*time.Millisecond
	}, 20*time.Second, 100*time.Millisecond, "the busy grandchild's CPU is the tree's")

	_, err = TreeCPU(1 << 30)
	require.Error(t, err)
}

func itoa(n int) string { return strconv.Itoa(n) }
