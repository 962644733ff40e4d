// Package render builds a kubebuilder project's kustomize configuration
// (config/default) with the kustomize library — no kustomize or kubectl
// binary needed — either in this process (a student's own project, on
// their own machine) or, while grading, in the submission's sandbox:
// a kustomization is the submission's, and what it names (files, URLs,
// git repositories) must be read as the box's unprivileged user, offline,
// never as the grader.
package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/labctl/labctl/internal/sandbox"
)

// EnvVar, set to a directory, makes this executable a render worker:
// MaybeRun builds that directory, prints the YAML and exits.
const EnvVar = "LABCTL_KUSTOMIZE_BUILD"

// Timeout bounds a boxed render; MaxOutput the YAML it may print.
const (
	Timeout   = 2 * time.Minute
	MaxOutput = 64 << 20
)

// Kustomize builds dir (a kustomization's directory) and returns the
// YAML, the way `kustomize build dir` does with its default load
// restrictions (files under dir only; remote bases are fetched).
func Kustomize(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return res.AsYaml()
}

// MaybeRun is the render worker: when EnvVar is set it builds that
// directory, writes the YAML on stdout (or the error on stderr, exit 1)
// and exits. Started only by Boxed, inside a sandbox; it fetches
// nothing: HTTP is refused in-process, and the sandbox's PATH has no git.
func MaybeRun() {
	dir, ok := os.LookupEnv(EnvVar)
	if !ok {
		return
	}
	http.DefaultTransport = refuse{}
	out, err := Kustomize(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(out)
	os.Exit(0)
}

// refuse is the worker's HTTP transport: a kustomization's URLs reach
// nothing, not even the box's own loopback.
type refuse struct{}

func (refuse) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("remote resource %s: the grader renders the submission's own files only", r.URL.Redacted())
}

// Boxed builds dir in box: this executable re-executed as a render
// worker, as the box's unprivileged user, in its mount and pid
// namespaces, with no git and no HTTP, bounded by Timeout and
// MaxOutput. A *BuildError is the project's (its kustomization does not
// build); any other error is the grader's.
func Boxed(parent context.Context, box *sandbox.Box, dir string) ([]byte, error) {
	if err := parent.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(parent, Timeout)
	defer cancel()
	spec := box.Spec(dir, []string{EnvVar + "=" + dir, "PATH=/nonexistent", "GIT_ALLOW_PROTOCOL=none"})
	// /proc/self/exe is the helper, this very executable, wherever it
	// lies (a test binary under a /tmp the box replaces).
	cmd, err := spec.Command([]string{"/proc/self/exe"}, nil)
	if err != nil {
		return nil, err
	}
	var out, errOut bytes.Buffer
	stdout := &limitWriter{w: &out, left: MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, &limitWriter{w: &errOut, left: 64 << 10}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		if parent.Err() != nil {
			return nil, parent.Err()
		}
		return nil, &BuildError{Msg: fmt.Sprintf("kustomize did not finish within %s", Timeout)}
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		if stdout.dropped {
			return nil, &BuildError{Msg: fmt.Sprintf("the rendered manifests exceed %d MiB", MaxOutput>>20)}
		}
		return out.Bytes(), nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return nil, &BuildError{Msg: strings.TrimSpace(errOut.String())}
	default:
		return nil, fmt.Errorf("render in the sandbox: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
}

// BuildError is a kustomization that does not build: the project's fault.
type BuildError struct{ Msg string }

func (e *BuildError) Error() string { return e.Msg }

// limitWriter keeps the first left bytes and drops the rest.
type limitWriter struct {
	w       io.Writer
	left    int
	dropped bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > l.left {
		p, l.dropped = p[:l.left], true
	}
	l.left -= len(p)
	_, err := l.w.Write(p)
	return n, err
}
