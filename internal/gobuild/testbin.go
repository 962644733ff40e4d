package gobuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Runner runs one go command: in a grading box, or here. An
// *exec.ExitError means go ran and failed (stderr says why); any other
// error means it could not run.
type Runner func(ctx context.Context, c Command) (stderr string, err error)

// TestBinary is one package's compiled test binary: built once, run as
// often as needed (once per mutant) without go test linking it again.
type TestBinary struct {
	ImportPath string
	// Dir is the package's directory: go test runs a binary there.
	Dir string
	// Path is the binary.
	Path string
	// Ginkgo: the package's tests import Ginkgo, so its binary takes
	// Ginkgo's flags.
	Ginkgo bool
}

const ginkgoImport = "github.com/onsi/ginkgo/v2"

// CompileTests builds the test binary of every package the patterns
// match that has tests, with go test -c and the given go flags (an
// -overlay), into out: base.Dir is the module, base.Write must include
// out (a sandbox lets the command write only there). When a package does
// not compile the returned run says so (BuildFailed, BuildOutput) and no
// binary is returned; an error means go could not run.
func CompileTests(ctx context.Context, run Runner, base Command, patterns, flags []string, out string) ([]TestBinary, *TestRun, error) {
	base.Yield = true // it only compiles
	var listed bytes.Buffer
	c := base
	c.Args = append(append([]string{"list", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles,TestImports,XTestImports"}, flags...), patterns...)
	c.Stdout = &listed
	stderr, err := run(ctx, c)
	if failed, err := buildFailure(err, stderr, patterns); failed != nil || err != nil {
		return nil, failed, err
	}
	var bins []TestBinary
	dec := json.NewDecoder(&listed)
	for {
		var p struct {
			ImportPath, Dir           string
			TestGoFiles, XTestGoFiles []string
			TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("reading go list: %w", err)
		}
		// A package outside the module (a replace elsewhere) is not the
		// project's to test.
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 || !within(base.Dir, p.Dir) {
			continue
		}
		bins = append(bins, TestBinary{
			ImportPath: p.ImportPath,
			Dir:        p.Dir,
			Path:       filepath.Join(out, fmt.Sprintf("%d.test", len(bins))),
			Ginkgo:     slices.Contains(p.TestImports, ginkgoImport) || slices.Contains(p.XTestImports, ginkgoImport),
		})
	}
	for _, b := range bins {
		c := base
		// Without the symbol table and DWARF: the binary is run, never
		// debugged, and its link takes a good part of the build's time.
		// Stacks and Ginkgo's code locations come from the pclntab, which
		// stays.
		c.Args = append(append([]string{"test", "-c", "-ldflags=-s -w", "-o", b.Path}, flags...), b.ImportPath)
		stderr, err := run(ctx, c)
		if failed, err := buildFailure(err, stderr, []string{b.ImportPath}); failed != nil || err != nil {
			return nil, failed, err
		}
	}
	return bins, nil, nil
}

// buildFailure tells a go command that failed on the project (a run
// naming what did not build) from one that could not run (an error).
func buildFailure(err error, stderr string, pkgs []string) (*TestRun, error) {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &exit):
		return &TestRun{Coverage: -1, BuildFailed: pkgs, BuildOutput: stderr, Output: map[string][]string{}}, nil
	}
	return nil, err
}

// Command is the go command that runs the binary as go test -json would:
// through test2json, in the package's directory, with the binary's flags
// (-test.timeout, -test.failfast, ...) after base's.
func (b TestBinary) Command(base Command, flags ...string) Command {
	c := base
	c.Dir = b.Dir
	c.Args = append([]string{"tool", "test2json", "-t", "-p", b.ImportPath, b.Path, "-test.v=test2json", "-test.paniconexit0"}, flags...)
	return c
}

// within says whether dir (absolute, as go list reports it) lies in root,
// which may be relative to this process's directory ("" is that directory).
func within(root, dir string) bool {
	root, err := filepath.Abs(root)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(root, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
