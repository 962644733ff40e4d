//go:build !linux

package supervise

import (
	"syscall"

	"github.com/labctl/labctl/internal/userr"
)

// Supervised managers belong to the local provider and the grading
// sandbox, which need Linux: here every limit refuses and the rest does
// nothing, so a supervisor that somehow starts fails with one line.

func errNeedsLinux() error { return userr.NeedsLinux("supervising an operator's manager") }

func limitCPUSeconds(uint64) error   { return errNeedsLinux() }
func limitAddressSpace(uint64) error { return errNeedsLinux() }
func writable(string) bool           { return false }
func becomeSubreaper()               {}

func (e *enforcer) procAttr() (*syscall.SysProcAttr, func(), error) {
	return &syscall.SysProcAttr{}, func() {}, nil
}

func killOrphans() {}
