//go:build !linux

package grade

import (
	"syscall"

	"github.com/labctl/labctl/internal/userr"
)

// boxProcAttr: boxes need Linux namespaces; the sandbox refuses before
// any box is started (userr.NeedsLinux), so this is never used there.
func boxProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// loopbackUp cannot happen outside Linux.
func loopbackUp() error { return userr.NeedsLinux("a grading box") }
