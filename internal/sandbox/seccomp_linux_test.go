package sandbox_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/labctl/labctl/internal/sandbox"
)

// probeEnv makes the test binary, run inside a sandbox, try to create
// user namespaces every way there is and report each outcome.
const probeEnv = "LABCTL_SANDBOX_TEST_PROBE"

// maybeProbe runs the probe and exits, when the test binary was started
// as one.
func maybeProbe() {
	if os.Getenv(probeEnv) != "" {
		probeUserNamespaces()
		os.Exit(0)
	}
}

func probeUserNamespaces() {
	errno := func(err error) string {
		if err == nil {
			return "ok"
		}
		var e syscall.Errno
		if errors.As(err, &e) {
			return unix.ErrnoName(e)
		}
		return err.Error()
	}
	fmt.Println("unshare:", errno(unix.Unshare(unix.CLONE_NEWUSER)))
	// clone3 with a zeroed struct the kernel would reject (EINVAL) if it
	// looked: ENOSYS says the filter answered.
	var args [11]uint64
	_, _, e := unix.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args[0])), unsafe.Sizeof(args), 0)
	fmt.Println("clone3:", errno(e))
	userns := exec.Command("true")
	userns.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	fmt.Println("clone:", errno(userns.Run()))
	fmt.Println("spawn:", errno(exec.Command("true").Run()))
	goVersion, err := exec.Command("go", "version").Output()
	fmt.Println("go:", errno(err), strings.Fields(string(goVersion) + " ? ? ?")[2])
}

// A sandboxed command cannot create a user namespace (unshare -U, the
// unshare and clone system calls, clone3), while processes, Go programs
// and the go command work as before.
func TestSandboxDeniesUserNamespaces(t *testing.T) {
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip(sup.Reason)
	}
	root := t.TempDir()
	box, err := sandbox.NewBox(filepath.Join(root, "box"), sandbox.UIDFor(root), nil)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(box.Src(), 0o755))
	// The test binary, where the sandbox can run it (its own /tmp is
	// private).
	self, err := os.Executable()
	require.NoError(t, err)
	raw, err := os.ReadFile(self)
	require.NoError(t, err)
	probe := filepath.Join(box.Home(), "probe")
	require.NoError(t, os.WriteFile(probe, raw, 0o755))
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	path := "PATH=" + filepath.Dir(goBin) + ":/usr/bin:/bin"
	spec := box.Spec(box.Home(), []string{path, "GOTOOLCHAIN=local", probeEnv + "=1"})

	run := func(argv ...string) (string, error) {
		cmd, err := spec.Command(argv, nil)
		require.NoError(t, err)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if _, err := exec.LookPath("unshare"); err == nil {
		out, err := run("unshare", "-U", "true")
		assert.Error(t, err, "unshare -U succeeded: %s", out)
		assert.Contains(t, out, "Operation not permitted")
		out, err = run("unshare", "-U", "-r", "id", "-u")
		assert.Error(t, err, "unshare -U -r succeeded: %s", out)
	}
	out, err := run(probe, "-test.run=^$")
	require.NoError(t, err, out)
	t.Log(out)
	assert.Contains(t, out, "unshare: EPERM")
	assert.Contains(t, out, "clone3: ENOSYS")
	assert.Contains(t, out, "clone: EPERM")
	assert.Contains(t, out, "spawn: ok")
	assert.Regexp(t, `go: ok go\d`, out)
	out, err = run("go", "version")
	require.NoError(t, err, out)
	assert.Contains(t, out, "go version")
}
