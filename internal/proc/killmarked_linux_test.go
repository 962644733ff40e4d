//go:build linux

package proc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a command left running, in a process group of its own (as
// envtest starts its etcd and kube-apiserver), is found by the entry its
// environment inherited, and killed; a process without it is left alone.
func TestKillMarkedReachesDescendantsInOtherGroups(t *testing.T) {
	entry := "LABCTL_TEST_MARK=" + t.Name()
	// sh starts a sleep in a new process group and exits: the sleep is an
	// orphan, as a leaked kube-apiserver is.
	sh := exec.Command("sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!")
	sh.Env = append(os.Environ(), entry)
	out, err := sh.Output()
	require.NoError(t, err)
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(orphan, syscall.SIGKILL) })

	other := exec.Command("sleep", "300")
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })

	require.Eventually(t, func() bool { return Alive(orphan) }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, KillMarked(entry))
	assert.Eventually(t, func() bool { return !Alive(orphan) }, 5*time.Second, 10*time.Millisecond, "the orphan is killed")
	assert.True(t, Alive(other.Process.Pid), "a process without the entry is left alone")
	assert.Zero(t, KillMarked(entry), "nothing is left to kill")
}
