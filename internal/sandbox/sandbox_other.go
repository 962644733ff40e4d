//go:build !linux

package sandbox

import (
	"os/exec"
	"syscall"

	"github.com/labctl/labctl/internal/userr"
)

// Sandboxes are Linux namespaces: elsewhere Probe says why not and
// Command refuses, so grading stops with one line (exit 4).

func namespaced() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// Command refuses: there are no namespaces to run argv in.
func (s *Spec) Command([]string, *syscall.SysProcAttr) (*exec.Cmd, error) {
	return nil, userr.NeedsLinux("grading in a sandbox")
}

// MaybeRun has nothing to do: Command never starts a helper here.
func MaybeRun() {}
