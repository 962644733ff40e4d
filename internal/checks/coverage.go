package checks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/tools/cover"
)

func init() {
	Register(Typed(Definition{
		Name: "coverage-profile",
		Doc:  "the project holds a Go cover profile (go test -coverprofile) with blocks of the given package; its coverage is reported, not judged",
	}, runCoverageProfile))
}

type coverageProfileParams struct {
	// File is the profile, relative to the project (default coverage.out).
	File string `json:"file"`
	// Package is the package the profile must cover, relative to the
	// module (default ./internal/controller).
	Package string `json:"package"`
}

func (p *coverageProfileParams) Validate() error { return nil }

func runCoverageProfile(_ context.Context, c *Context, p *coverageProfileParams) Outcome {
	dir := c.ProjectDir()
	if dir == "" {
		return skip("no project directory to read (pass --project DIR)")
	}
	file := p.File
	if file == "" {
		file = "coverage.out"
	}
	pkg := p.Package
	if pkg == "" {
		pkg = "./internal/controller"
	}
	expected := fmt.Sprintf("%s: a cover profile of %s (go test -coverprofile=%s %s/...)", file, pkg, file, pkg)
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return skip("the project has no go.mod, so which package %s is cannot be told", pkg)
	}
	importPath := path.Join(modfile.ModulePath(mod), strings.TrimPrefix(pkg, "./"))
	raw, err := readSubmitted(filepath.Join(dir, filepath.FromSlash(file)), maxProfile)
	if errors.Is(err, errNotRegular) {
		out := fail("%s is not a regular file: write the profile itself there with go test -coverprofile=%s", file, file)
		out.Expected = expected
		return out
	}
	if err != nil {
		out := fail("there is no %s in the project: run go test -coverprofile=%s %s/... in the project's directory", file, file, pkg)
		out.Expected = expected
		return out
	}
	prof, err := parseCoverProfile(raw)
	if err != nil {
		out := fail("%s is not a Go cover profile (%v): write it with go test -coverprofile=%s", file, err, file)
		out.Expected = expected
		return out
	}
	stmts, covered := prof.of(importPath)
	if stmts == 0 {
		out := fail("%s has no statement of %s (it covers %s): run go test -coverprofile=%s %s/...", file, importPath, strings.Join(prof.packages(), ", "), file, pkg)
		out.Expected = expected
		return out
	}
	return pass("%s covers %s: %.1f%% of its statements (%d of %d)", file, importPath, 100*float64(covered)/float64(stmts), covered, stmts)
}

// maxProfile bounds what is read of a profile: the controller package's
// is a few kilobytes.
const maxProfile = 64 << 20

var errNotRegular = errors.New("not a regular file")

// readSubmitted reads a file of a project that may be a student's: a
// regular file only (never where a symlink points: when grading, that
// may be outside the submission), at most limit bytes.
func readSubmitted(path string, limit int64) ([]byte, error) {
	before, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, errNotRegular
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !os.SameFile(before, fi) { // replaced by a symlink since
		return nil, errNotRegular
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is larger than %d MiB", filepath.Base(path), limit>>20)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// coverProfile is what a Go cover profile says (golang.org/x/tools/cover
// reads it, merging a block written twice by several test binaries).
type coverProfile struct {
	files []*cover.Profile
}

// parseCoverProfile reads what go test -coverprofile writes.
func parseCoverProfile(raw []byte) (*coverProfile, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, fmt.Errorf("it is empty")
	}
	files, err := cover.ParseProfilesFromReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return &coverProfile{files: files}, nil
}

// of counts the statements of the package at importPath (its files, not
// its sub-packages') and those that ran.
func (p *coverProfile) of(importPath string) (stmts, covered int) {
	for _, f := range p.files {
		if path.Dir(f.FileName) != importPath {
			continue
		}
		for _, b := range f.Blocks {
			stmts += b.NumStmt
			if b.Count > 0 {
				covered += b.NumStmt
			}
		}
	}
	return stmts, covered
}

// packages are the import paths the profile names, sorted.
func (p *coverProfile) packages() []string {
	var out []string
	for _, f := range p.files {
		if d := path.Dir(f.FileName); !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}
