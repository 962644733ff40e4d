//go:build !linux

package proc

import (
	"context"
	"time"

	"github.com/labctl/labctl/internal/userr"
)

// Processes are tracked through /proc and pidfds, which only Linux has;
// elsewhere the local provider, their only user, refuses to start (exit 4).

func errNeedsLinux() error { return userr.NeedsLinux("running a local control plane") }

// StartTime needs /proc.
func StartTime(int) (uint64, error) { return 0, errNeedsLinux() }

// StopRecord has nothing to stop: Start never started anything here.
func StopRecord(context.Context, Record, time.Duration) error { return nil }

// KillUID finds nothing without /proc.
func KillUID(int) int { return 0 }

// Start refuses: see errNeedsLinux.
func Start(Spec) (*Running, error) { return nil, errNeedsLinux() }

// Find finds nothing without /proc.
func Find(string) ([]Process, error) { return nil, nil }

// Alive knows no process labctl started.
func Alive(int) bool { return false }

// Stop has nothing to stop.
func Stop(context.Context, int, time.Duration) error { return nil }

// Memory is unknown without /proc.
func Memory(int) (rss, pss uint64) { return 0, 0 }

// TreeCPU is unknown without /proc.
func TreeCPU(int) (time.Duration, error) { return 0, errNeedsLinux() }

// KillMarked finds processes through /proc: elsewhere it kills none.
func KillMarked(string) int { return 0 }
