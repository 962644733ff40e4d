package checks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
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

// coverProfile is what a Go cover profile says, per source file: its
// statements, and those that ran. A block named twice (go test writes
// one per test binary when several cover the same file) counts once,
// covered if any run covered it.
type coverProfile struct {
	files map[string]map[string]coverBlock
}

type coverBlock struct {
	stmts   int
	covered bool
}

// parseCoverProfile reads the format go test -coverprofile writes:
// "mode: set|count|atomic", then "file:line.col,line.col stmts count".
func parseCoverProfile(raw []byte) (*coverProfile, error) {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	if !sc.Scan() {
		return nil, fmt.Errorf("it is empty")
	}
	mode, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "mode: ")
	if !ok || (mode != "set" && mode != "count" && mode != "atomic") {
		return nil, fmt.Errorf("its first line is not mode: set, count or atomic")
	}
	prof := &coverProfile{files: map[string]map[string]coverBlock{}}
	for n := 2; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		file, block, stmts, count, err := parseCoverLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		blocks := prof.files[file]
		if blocks == nil {
			blocks = map[string]coverBlock{}
			prof.files[file] = blocks
		}
		b := blocks[block]
		b.stmts = stmts
		b.covered = b.covered || count > 0
		blocks[block] = b
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return prof, nil
}

// parseCoverLine splits "file:1.2,3.4 5 6".
func parseCoverLine(line string) (file, block string, stmts, count int, err error) {
	colon := strings.LastIndex(line, ":")
	if colon <= 0 {
		return "", "", 0, 0, fmt.Errorf("no file:position")
	}
	file = line[:colon]
	fields := strings.Fields(line[colon+1:])
	if len(fields) != 3 || !strings.Contains(fields[0], ",") {
		return "", "", 0, 0, fmt.Errorf("not start,end statements count")
	}
	if stmts, err = strconv.Atoi(fields[1]); err == nil {
		count, err = strconv.Atoi(fields[2])
	}
	if err != nil || stmts < 0 || count < 0 {
		return "", "", 0, 0, fmt.Errorf("statements and count are not numbers")
	}
	return file, fields[0], stmts, count, nil
}

// of counts the statements of the package at importPath (its files, not
// its sub-packages') and those that ran.
func (p *coverProfile) of(importPath string) (stmts, covered int) {
	for file, blocks := range p.files {
		if path.Dir(file) != importPath {
			continue
		}
		for _, b := range blocks {
			stmts += b.stmts
			if b.covered {
				covered += b.stmts
			}
		}
	}
	return stmts, covered
}

// packages are the import paths the profile names, sorted.
func (p *coverProfile) packages() []string {
	seen := map[string]bool{}
	var out []string
	for file := range p.files {
		if d := path.Dir(file); !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}
