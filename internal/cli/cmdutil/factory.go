// Package cmdutil holds what every command shares: the streams, how to find
// providers, and how to turn errors into one printed line and an exit code.
package cmdutil

import (
	"fmt"

	"github.com/labctl/labctl/internal/iostreams"
)

// Factory carries the dependencies commands need. Tests build one with
// buffer-backed streams and fake parts.
type Factory struct {
	IOStreams *iostreams.IOStreams
	// Version is the labctl build version (set by main from ldflags).
	Version string
	// Providers resolves --provider and finds clusters.
	Providers *Providers
}

// SilentError ends a command with an exit code after it has already printed
// everything the user needs (e.g. verify's report of failed tasks).
type SilentError struct{ Code int }

func (e *SilentError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode lets userr.Code find the code.
func (e *SilentError) ExitCode() int { return e.Code }
