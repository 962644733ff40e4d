// Package solution implements `labctl solution LAB`: for each task, the
// reference operator's code that answers it, and --apply to copy those
// files into a student's project (internal/labs/solution reads and
// extracts them).
package solution

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/labs/solution"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/userr"
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
	// Getenv reads LANG; os.Getenv by default.
	Getenv func(string) string
}

// NewCommand returns the solution command.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	cmd := &cobra.Command{
		Use:               "solution LAB",
		ValidArgsFunction: f.CompleteLabArg,
		Short:             "Show the reference code that answers each task of a lab",
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

// Run shows or applies a lab's solution.
func Run(_ context.Context, o *Options) error {
	s := o.f.IOStreams
	all, err := o.f.Labs()
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
	entries, err := solution.Entries(sols, lab.ID, o.Tasks)
	if err != nil {
		return err
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
		snippets, err := solution.Extract(e.File, src, e.Names)
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

// apply copies the files; operator says whether the lab's project is a
// kubebuilder project (lab 1.4's is a CRD file).
func apply(o *Options, op fs.FS, operator bool, labID string, entries []solution.Entry) error {
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
	written, err := solution.Apply(op, dir, entries, o.Force, s.Out)
	if err != nil {
		return err
	}
	switch {
	case written == 0:
	case operator:
		fmt.Fprintln(s.ErrOut, "Next: make generate manifests, then labctl up --project "+o.Apply)
	default:
		fmt.Fprintf(s.ErrOut, "Next: kubectl apply -f the files, or labctl verify %s --project %s\n", labID, o.Apply)
	}
	return nil
}
