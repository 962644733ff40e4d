// Package solution implements `labctl solution LAB`: for each task, the
// reference operator's code that answers it (solutions/<lab>/files.txt
// maps tasks to files and functions of operator/), and --apply to copy
// those files into a student's project.
package solution

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/userr"
	labsfs "github.com/labctl/labctl/labs"
	"github.com/labctl/labctl/solutions"
)

// Options are the flags and sources of `labctl solution`.
type Options struct {
	f *cmdutil.Factory

	Lab   string
	Tasks []string
	Apply string
	Force bool
	Lang  string

	// Solutions holds lab-*/files.txt (the embedded solutions/ by default).
	Solutions fs.FS
	// Operator holds the reference project's files (by default the
	// embedded reference project of the lab, internal/reference.Lookup).
	Operator fs.FS
	// Labs loads the lab definitions (for task titles).
	Labs func() ([]*labs.Lab, error)
	// Getenv reads LANG; os.Getenv by default.
	Getenv func(string) string
}

// NewCommand returns the solution command.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	cmd := &cobra.Command{
		Use:   "solution LAB",
		Short: "Show the reference code that answers each task of a lab",
		Long: `Print, task by task, the code of the course's reference operator that
answers a lab: the functions and types named in solutions/<lab>/files.txt.

With --apply DIR the files holding those answers are copied into your
project at the same paths. A file of yours that differs from the reference
is not overwritten unless you pass --force; nothing is written then.`,
		Example: `  labctl solution lab-3.4
  labctl solution 8.2 --task 3.2
  labctl solution lab-8.2 --apply ~/postgres-operator`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Lab = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringSliceVar(&o.Tasks, "task", nil, "only these tasks (repeat or separate with commas)")
	cmd.Flags().StringVar(&o.Apply, "apply", "", "copy the answering files into this project directory")
	cmd.Flags().BoolVar(&o.Force, "force", false, "with --apply, overwrite files that differ from the reference")
	cmd.Flags().StringVar(&o.Lang, "lang", "", "language of task titles: en or ru (default from LANG)")
	return cmd
}

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

// Run shows or applies a lab's solution.
func Run(_ context.Context, o *Options) error {
	s := o.f.IOStreams
	loadLabs := o.Labs
	if loadLabs == nil {
		loadLabs = func() ([]*labs.Lab, error) { return labs.Load(labsfs.FS) }
	}
	all, err := loadLabs()
	if err != nil {
		return err
	}
	lab, err := labs.FindLab(all, o.Lab)
	if err != nil {
		return err
	}
	lang, err := labs.ResolveLang(o.Lang, o.Getenv)
	if err != nil {
		return err
	}
	sols, op := o.Solutions, o.Operator
	if sols == nil {
		sols = solutions.FS
	}
	ref, err := reference.Lookup(lab.Project)
	if err != nil {
		return err
	}
	if op == nil {
		op = ref.Source
	}
	raw, err := fs.ReadFile(sols, lab.ID+"/files.txt")
	if err != nil {
		return userr.New(fmt.Sprintf("there is no reference solution for %s", lab.ID), "solutions exist for the labs that have solutions/<lab>/files.txt")
	}
	entries, err := ParseFiles(raw)
	if err != nil {
		return err
	}
	for _, t := range o.Tasks {
		if !slices.ContainsFunc(entries, func(e Entry) bool { return e.Task == t }) {
			return userr.Usage(fmt.Sprintf("the solution of %s has nothing for task %q", lab.ID, t), "see `labctl labs show "+lab.ID+"`")
		}
	}
	if len(o.Tasks) > 0 {
		entries = slices.DeleteFunc(entries, func(e Entry) bool { return !slices.Contains(o.Tasks, e.Task) })
	}
	if o.Apply != "" {
		return apply(o, op, ref.Operator, lab.ID, entries)
	}
	st := s.Styles()
	for i, e := range entries {
		if i > 0 {
			fmt.Fprintln(s.Out)
		}
		title := ""
		if t, ok := lab.Task(e.Task); ok {
			title = t.Title.In(lang)
		}
		fmt.Fprintf(s.Out, "%s %s  %s\n", st.Bold.Render("Task "+e.Task), title, st.Muted.Render(ref.RepoDir+"/"+e.File))
		src, err := fs.ReadFile(op, e.File)
		if err != nil {
			return fmt.Errorf("the reference operator has no %s (solutions/%s/files.txt is out of date): %w", e.File, lab.ID, err)
		}
		snippets, err := Extract(e.File, src, e.Names)
		if err != nil {
			return err
		}
		for j, sn := range snippets {
			if j > 0 {
				fmt.Fprintln(s.Out)
			}
			fmt.Fprintln(s.Out, st.Muted.Render(fmt.Sprintf("// %s:%d", e.File, sn.Line)))
			fmt.Fprintln(s.Out, strings.TrimRight(sn.Code, "\n"))
		}
	}
	return nil
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

// apply copies the files; operator says whether the lab's project is a
// kubebuilder project (lab 1.4's is a CRD file).
func apply(o *Options, op fs.FS, operator bool, labID string, entries []Entry) error {
	s := o.f.IOStreams
	dir, err := cmdutil.Dir(o.Apply, "--apply")
	if err != nil {
		return err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return userr.Usage(fmt.Sprintf("project directory %s does not exist", dir), "pass --apply with the path to your kubebuilder project")
	}
	if _, err := os.Stat(filepath.Join(dir, "PROJECT")); err != nil && operator {
		fmt.Fprintf(s.ErrOut, "warning: %s has no PROJECT file; is it a kubebuilder project?\n", dir)
	}
	var files []string
	for _, e := range entries {
		if !slices.Contains(files, e.File) {
			files = append(files, e.File)
		}
	}
	type plan struct {
		file    string
		content []byte
		exists  bool
	}
	var todo []plan
	var changed []string
	for _, f := range files {
		content, err := fs.ReadFile(op, f)
		if err != nil {
			return fmt.Errorf("the reference operator has no %s: %w", f, err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f))
		have, err := os.ReadFile(dst)
		switch {
		case err == nil && bytes.Equal(have, content):
			fmt.Fprintf(s.Out, "unchanged  %s\n", f)
			continue
		case err == nil:
			changed = append(changed, f)
			todo = append(todo, plan{f, content, true})
		case os.IsNotExist(err):
			todo = append(todo, plan{f, content, false})
		default:
			return err
		}
	}
	if len(changed) > 0 && !o.Force {
		return userr.Usage(fmt.Sprintf("%d file(s) of yours differ from the reference and were left alone: %s", len(changed), strings.Join(changed, ", ")),
			"nothing was written; rerun with --force to overwrite them (commit your work first)")
	}
	for _, p := range todo {
		dst := filepath.Join(dir, filepath.FromSlash(p.file))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, p.content, 0o644); err != nil {
			return err
		}
		verb := "created    "
		if p.exists {
			verb = "overwrote  "
		}
		fmt.Fprintf(s.Out, "%s%s\n", verb, p.file)
	}
	switch {
	case len(todo) == 0:
	case operator:
		fmt.Fprintln(s.ErrOut, "Next: make generate manifests, then labctl up --project "+o.Apply)
	default:
		fmt.Fprintf(s.ErrOut, "Next: kubectl apply -f the files, or labctl verify %s --project %s\n", labID, o.Apply)
	}
	return nil
}
