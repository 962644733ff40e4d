// Package engine drives a container engine CLI (Docker or Podman): which one
// works on this machine, and the few commands labctl needs from it (info,
// build, image inspect, save, exec). Every command goes through a Runner, so
// tests replace the engine with a fake, as kind does with its exec package.
package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// Cmd is one command to run.
type Cmd struct {
	Name string
	Args []string
	// Dir is the working directory ("" = the current one).
	Dir string
	// Env holds KEY=VALUE pairs added to the process environment.
	Env []string
	// Stdin, Stdout and Stderr may be nil. When Stderr is nil the runner
	// keeps its last lines for the error.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// String renders the command as a user could type it.
func (c Cmd) String() string {
	parts := append([]string{c.Name}, c.Args...)
	for i, p := range parts {
		if p == "" || strings.ContainsAny(p, " \t\"'$`\\{}") {
			parts[i] = fmt.Sprintf("%q", p)
		}
	}
	return strings.Join(parts, " ")
}

// Runner runs commands. OSRunner runs them for real; tests fake it.
type Runner interface {
	// LookPath finds an executable on PATH (like exec.LookPath).
	LookPath(file string) (string, error)
	// Run runs cmd to completion. A command that ran and failed returns
	// an *ExitError.
	Run(ctx context.Context, cmd Cmd) error
}

// ExitError is a command that ran and exited non-zero.
type ExitError struct {
	Command string
	Code    int
	// Stderr holds the last lines the command wrote to stderr (when the
	// caller did not take stderr itself).
	Stderr string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("`%s` exited with code %d", e.Command, e.Code)
	if l := LastLine(e.Stderr); l != "" {
		msg += ": " + l
	}
	return msg
}

// LastLine returns the last non-empty line of s, trimmed.
func LastLine(s string) string {
	lines := LastLines(s, 1)
	if len(lines) == 0 {
		return ""
	}
	return lines[0]
}

// LastLines returns up to n last non-empty lines of s, trimmed.
func LastLines(s string, n int) []string {
	var out []string
	lines := strings.Split(strings.ReplaceAll(s, "\r", "\n"), "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append(out, l)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// OSRunner runs commands with os/exec.
type OSRunner struct{}

// LookPath implements Runner.
func (OSRunner) LookPath(file string) (string, error) { return exec.LookPath(file) }

// Run implements Runner.
func (OSRunner) Run(ctx context.Context, c Cmd) error {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Dir = c.Dir
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.Stdin = c.Stdin
	cmd.Stdout = c.Stdout
	var tail *TailBuffer
	if c.Stderr != nil {
		cmd.Stderr = c.Stderr
	} else {
		tail = &TailBuffer{Max: 8 << 10}
		cmd.Stderr = tail
	}
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		out := &ExitError{Command: c.String(), Code: ee.ExitCode()}
		if tail != nil {
			out.Stderr = tail.String()
		}
		return out
	}
	return err
}

// Output runs name with args and returns its standard output.
func Output(ctx context.Context, r Runner, name string, args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := r.Run(ctx, Cmd{Name: name, Args: args, Stdout: &out})
	return out.Bytes(), err
}

// TailBuffer keeps the last Max bytes written to it.
type TailBuffer struct {
	Max int
	buf []byte
}

// Write implements io.Writer.
func (t *TailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if max := t.Max; max > 0 && len(t.buf) > max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-max:]...)
	}
	return len(p), nil
}

// String returns what is kept.
func (t *TailBuffer) String() string { return string(t.buf) }
