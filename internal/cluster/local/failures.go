// Why a component did not start, as one line from the end of its log, and what to do next.

package local

import (
	"fmt"
	"strings"

	"github.com/labctl/labctl/internal/diskfree"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/userr"
)

// diedError describes a component that exited during start-up, with the
// tail of its log printed first so the cause is on screen.
func (p *Provider) diedError(s *iostreams.IOStreams, l layout, st *state, component string, exitErr error) error {
	tail := proc.Tail(l.log(component), 40)
	for _, line := range tail {
		if strings.Contains(line, "address already in use") {
			for _, port := range st.Ports.list() {
				if strings.Contains(line, fmt.Sprintf(":%d", port)) {
					return &portBusyError{component: component, port: port}
				}
			}
		}
	}
	for _, line := range tail {
		if strings.Contains(line, "no space left on device") {
			return userr.Wrap(exitErr, userr.ExitEnvironment,
				fmt.Sprintf("the disk of %s is full: %s stopped with \"no space left on device\"; a local cluster needs about %d MiB free", l.dir, component, minFreeBytes>>20),
				"free some space (or set XDG_STATE_HOME to a disk with room), then `labctl up` again")
		}
	}
	if len(tail) > 8 {
		tail = tail[len(tail)-8:]
	}
	if s.Verbose {
		muted := s.Styles().Muted
		fmt.Fprintf(s.ErrOut, "\n%s\n", muted.Render("last lines of "+l.log(component)+":"))
		for _, line := range tail {
			fmt.Fprintln(s.ErrOut, muted.Render("  "+logline.Cut(line, 300)))
		}
	}
	last := logline.Cut(logline.Cause(tail), 200)
	return userr.Wrap(exitErr, userr.ExitFailure, fmt.Sprintf("%s exited during start-up (%v): %s", component, exitErr, last),
		fmt.Sprintf("see %s, then run `labctl down --name %s` and `labctl up` again", l.log(component), st.Name))
}

// minFreeBytes is what a new local cluster needs on the state directory's
// disk: etcd preallocates a 64 MiB WAL segment, then its database, the
// logs and the audit log grow while labs run.
const minFreeBytes = 300 << 20

func checkFreeSpace(dir string, need int64) error {
	switch {
	case need < 0:
		return nil
	case need == 0:
		need = minFreeBytes
	}
	free, err := diskfree.Available(dir)
	if err != nil {
		return nil // cannot tell; the start-up will say what fails
	}
	if free >= uint64(need) {
		return nil
	}
	return userr.Env(fmt.Sprintf("not enough disk space for a local cluster in %s: %d MiB free, it needs about %d MiB", dir, free>>20, need>>20),
		"free some space, or set XDG_STATE_HOME to a disk with room")
}

func (p *Provider) timeoutError(l layout, component string, err error) error {
	last := proc.Tail(l.log(component), 1)
	detail := ""
	if len(last) > 0 {
		detail = "; its log ends: " + logline.Cut(last[0], 200)
	}
	return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("%s did not become ready: %v%s", component, err, detail),
		"see "+l.log(component)+"; a loaded machine may need a retry")
}
