// Package gobuild reads what `go build` says when a project does not
// compile, for people: the first compiler errors, not the whole output.
package gobuild

import (
	"fmt"
	"io"
	"strings"

	"github.com/labctl/labctl/internal/userr"
)

// Error is a project that does not compile; Output holds the compiler's
// messages.
type Error struct {
	Dir    string
	Output string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("the project in %s does not build: %s", e.Dir, FirstErrors(e.Output, 1))
}

// Unwrap lets userr find a code.
func (e *Error) Unwrap() error {
	return userr.Wrap(e.Err, userr.ExitFailure, e.Error(), "run `go build ./...` in the project and fix the errors")
}

// FirstErrors returns the first n compiler error lines of go build output.
func FirstErrors(out string, n int) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, l)
		if len(lines) == n {
			break
		}
	}
	if len(lines) == 0 {
		return "go build failed"
	}
	return strings.Join(lines, " | ")
}

// Command is one go command to run for a check: go Args in Dir.
type Command struct {
	Dir  string
	Args []string
	// Env is added to the command's environment (KUBEBUILDER_ASSETS).
	Env []string
	// Read are host directories the command may read besides the project
	// (the envtest binaries, a build overlay's files): a sandbox shows
	// them read-only at the same paths.
	Read []string
	// Write are host directories the command writes (test binaries it
	// builds): a sandbox shows them read-write at the same paths and
	// gives them to its user.
	Write []string
	// Stdout receives what go writes on its standard output (nil drops
	// it: go test -json's events, go list's packages).
	Stdout io.Writer
	// Yield: the command only compiles (go list -export, go test -c), so
	// it may run at a lowered priority and leave the cluster under test
	// beside it its share of the CPU. A command that runs tests never
	// yields: their own waits (an Eventually's window, envtest's start)
	// judge the verdict, and at a lowered priority any other load on the
	// machine would take nearly all of their CPU (nice 10 weighs a tenth
	// of a normal process).
	Yield bool
}
