// Package userr carries failures meant for people: one line saying what went
// wrong and what to do next, plus the process exit code. Commands return
// these; main prints them without stack traces.
package userr

import (
	"errors"
	"fmt"
)

// Exit codes, documented in README.md.
const (
	ExitOK          = 0 // everything worked; for verify/grade: every check passed
	ExitFailure     = 1 // the command could not do its job (cluster, build, I/O)
	ExitUsage       = 2 // bad flags, arguments or input
	ExitChecks      = 3 // verify ran, and at least one task failed
	ExitEnvironment = 4 // a prerequisite is missing: Go, a container engine, disk
	ExitInterrupted = 130
)

// ExitCodes documents every exit code, in order: README.md's "Exit codes"
// table must say exactly this (a test compares them).
var ExitCodes = []struct {
	Code    int
	Meaning string
}{
	{ExitOK, "success; `verify`: every task passed; `grade`: every submission was graded, whatever its score (the scores are in the gradebook)"},
	{ExitFailure, "the command failed (cluster, build, I/O), or the cluster stopped answering during `verify` (the tasks were not judged); the message says what to do"},
	{ExitUsage, "bad flags, arguments or input"},
	{ExitChecks, "`verify` ran and at least one task failed"},
	{ExitEnvironment, "a prerequisite is missing (Go, a container engine, disk space, a home directory)"},
	{ExitInterrupted, "interrupted (Ctrl-C or SIGTERM); tasks still running were not judged"},
}

// Error is a user-facing failure.
type Error struct {
	What string // what went wrong, one sentence, no trailing period
	Next string // what to do about it
	Code int
	Err  error // the underlying cause, for errors.Is/As and -v
}

func (e *Error) Error() string {
	if e.Next == "" {
		return e.What
	}
	return e.What + ": " + e.Next
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an Error with exit code ExitFailure.
func New(what, next string) *Error { return &Error{What: what, Next: next, Code: ExitFailure} }

// Wrap returns an Error caused by err.
func Wrap(err error, code int, what, next string) *Error {
	return &Error{What: what, Next: next, Code: code, Err: err}
}

// Usage returns an Error for bad input (exit 2).
func Usage(what, next string) *Error { return &Error{What: what, Next: next, Code: ExitUsage} }

// Env returns an Error for a missing prerequisite (exit 4).
func Env(what, next string) *Error { return &Error{What: what, Next: next, Code: ExitEnvironment} }

// Wrapf is a small helper for the common case of annotating an internal error
// with a sentence that still reads as one line.
func Wrapf(err error, next, format string, args ...any) *Error {
	return &Error{What: fmt.Sprintf(format, args...) + ": " + oneLine(err), Next: next, Code: ExitFailure, Err: err}
}

// Code returns the exit code for err (ExitFailure for unknown errors).
func Code(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return ExitFailure
}

// Message renders err as the single line printed to the user.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return oneLine(e)
	}
	return oneLine(err)
}

func oneLine(err error) string {
	s := err.Error()
	out := make([]rune, 0, len(s))
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			out = append(out, ' ')
		case r < 0x20 || r == 0x7f:
			// drop other control characters: they may come from a cluster
		default:
			out = append(out, r)
		}
	}
	return string(out)
}

// NeedsLinux is the error of a part of labctl that only Linux can run
// (the local provider's control plane, the grading sandbox): exit 4, one
// line, and what works instead.
func NeedsLinux(what string) *Error {
	return Env(what+" needs Linux (or WSL2 on Windows)",
		"use `--provider kind` with Docker or Podman, or run labctl inside WSL2")
}
