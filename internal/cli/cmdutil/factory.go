// Package cmdutil holds what every command shares: the streams, how to find
// providers, and how to turn errors into one printed line and an exit code.
package cmdutil

import (
	"fmt"
	"io/fs"
	"sync"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	labsfs "github.com/labctl/labctl/labs"
)

// Factory carries the dependencies commands need. Tests build one with
// buffer-backed streams and fake parts.
type Factory struct {
	IOStreams *iostreams.IOStreams
	// Version is the labctl build version (set by main from ldflags).
	Version string
	// Providers resolves --provider and finds clusters.
	Providers *cluster.Providers
	// LabFS is where the lab catalogue is read from: the embedded labs
	// when nil.
	LabFS fs.FS

	labsOnce sync.Once
	labs     []*labs.Lab
	labsErr  error
}

// Labs is the lab catalogue (LabFS, or the labs built into labctl), read
// and validated once per command.
func (f *Factory) Labs() ([]*labs.Lab, error) {
	f.labsOnce.Do(func() {
		fsys := f.LabFS
		if fsys == nil {
			fsys = labsfs.FS
		}
		f.labs, f.labsErr = labs.Load(fsys)
	})
	return f.labs, f.labsErr
}

// SilentError ends a command with an exit code after it has already printed
// everything the user needs (e.g. verify's report of failed tasks).
type SilentError struct{ Code int }

func (e *SilentError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode lets userr.Code find the code.
func (e *SilentError) ExitCode() int { return e.Code }
