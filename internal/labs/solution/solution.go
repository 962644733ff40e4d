// Package solution reads the labs' reference solutions: solutions/<lab>/
// files.txt maps each task to files, functions and types of the lab's
// reference project (internal/reference), whose code answers it. It
// extracts that code for display and copies the files into a student's
// project.
package solution

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/labctl/labctl/internal/userr"
)

// Entry is one line of files.txt: a task, a file of the operator and the
// functions or types in it that answer the task (none: the whole file).
type Entry struct {
	Task  string
	File  string
	Names []string
}

// ParseFiles reads files.txt: "TASK FILE [NAME...]" per line; blank lines
// and lines starting with # are skipped.
func ParseFiles(raw []byte) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("files.txt line %d: want TASK FILE [NAME...]", n)
		}
		if path.IsAbs(f[1]) || strings.Contains(f[1], "..") {
			return nil, fmt.Errorf("files.txt line %d: %s must be relative to the lab's project", n, f[1])
		}
		out = append(out, Entry{Task: f[0], File: f[1], Names: f[2:]})
	}
	return out, sc.Err()
}

// Entries reads the solution of lab labID from sols (the solutions/
// directory) and keeps the entries of tasks (all when empty).
func Entries(sols fs.FS, labID string, tasks []string) ([]Entry, error) {
	raw, err := fs.ReadFile(sols, labID+"/files.txt")
	if err != nil {
		return nil, userr.New(fmt.Sprintf("there is no reference solution for %s", labID), "solutions exist for the labs that have solutions/<lab>/files.txt")
	}
	entries, err := ParseFiles(raw)
	if err != nil {
		return nil, err
	}
	for _, t := range tasks {
		if !slices.ContainsFunc(entries, func(e Entry) bool { return e.Task == t }) {
			return nil, userr.Usage(fmt.Sprintf("the solution of %s has nothing for task %q", labID, t), "see `labctl labs show "+labID+"`")
		}
	}
	if len(tasks) > 0 {
		entries = slices.DeleteFunc(entries, func(e Entry) bool { return !slices.Contains(tasks, e.Task) })
	}
	return entries, nil
}

// Snippet is a piece of a file, starting at Line.
type Snippet struct {
	Line int
	Code string
}

// Extract returns the declarations named in names (functions, methods,
// types, constants), with their doc comments, from a Go file; the whole
// file for other files or when names is empty (long files cut short).
func Extract(name string, src []byte, names []string) ([]Snippet, error) {
	if !strings.HasSuffix(name, ".go") || len(names) == 0 {
		lines := strings.Split(strings.TrimRight(string(src), "\n"), "\n")
		const max = 80
		if len(lines) > max {
			lines = append(lines[:max], fmt.Sprintf("… (%d more lines: see the file)", len(lines)-max))
		}
		return []Snippet{{Line: 1, Code: strings.Join(lines, "\n")}}, nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	var out []Snippet
	found := map[string]bool{}
	cut := func(from, to token.Pos) {
		start, end := fset.Position(from), fset.Position(to)
		out = append(out, Snippet{Line: start.Line, Code: string(src[start.Offset:end.Offset])})
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if slices.Contains(names, d.Name.Name) {
				found[d.Name.Name] = true
				from := d.Pos()
				if d.Doc != nil {
					from = d.Doc.Pos()
				}
				cut(from, d.End())
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				var ids []*ast.Ident
				switch sp := spec.(type) {
				case *ast.TypeSpec:
					ids = []*ast.Ident{sp.Name}
				case *ast.ValueSpec:
					ids = sp.Names
				}
				for _, id := range ids {
					if !slices.Contains(names, id.Name) || found[id.Name] {
						continue
					}
					found[id.Name] = true
					from, to := d.Pos(), d.End()
					if d.Lparen.IsValid() { // grouped: only this spec
						from, to = spec.Pos(), spec.End()
					}
					if d.Doc != nil && !d.Lparen.IsValid() {
						from = d.Doc.Pos()
					}
					cut(from, to)
				}
			}
		}
	}
	for _, n := range names {
		if !found[n] {
			return nil, fmt.Errorf("%s declares no %s (the solution mapping is out of date)", name, n)
		}
	}
	return out, nil
}

// Apply copies the files of entries from the reference project ref into
// the project directory dir, saying what it did on out. A file of dir that
// differs from the reference is an error unless force, and then nothing
// is written. It returns how many files it wrote.
func Apply(ref fs.FS, dir string, entries []Entry, force bool, out io.Writer) (int, error) {
	var files []string
	for _, e := range entries {
		if !slices.Contains(files, e.File) {
			files = append(files, e.File)
		}
	}
	type write struct {
		file    string
		content []byte
		exists  bool
	}
	var todo []write
	var changed []string
	for _, f := range files {
		content, err := fs.ReadFile(ref, f)
		if err != nil {
			return 0, fmt.Errorf("the reference operator has no %s: %w", f, err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f))
		have, err := os.ReadFile(dst)
		switch {
		case err == nil && bytes.Equal(have, content):
			fmt.Fprintf(out, "unchanged  %s\n", f)
			continue
		case err == nil:
			changed = append(changed, f)
			todo = append(todo, write{f, content, true})
		case os.IsNotExist(err):
			todo = append(todo, write{f, content, false})
		default:
			return 0, err
		}
	}
	if len(changed) > 0 && !force {
		return 0, userr.Usage(fmt.Sprintf("%d file(s) of yours differ from the reference and were left alone: %s", len(changed), strings.Join(changed, ", ")),
			"nothing was written; rerun with --force to overwrite them (commit your work first)")
	}
	for _, w := range todo {
		dst := filepath.Join(dir, filepath.FromSlash(w.file))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(dst, w.content, 0o644); err != nil {
			return 0, err
		}
		verb := "created    "
		if w.exists {
			verb = "overwrote  "
		}
		fmt.Fprintf(out, "%s%s\n", verb, w.file)
	}
	return len(todo), nil
}
