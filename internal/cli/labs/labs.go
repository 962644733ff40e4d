// Package labs implements `labctl labs` (the labs labctl can verify) and
// `labctl labs show LAB` (a lab's tasks).
package labs

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/report"
)

// Options are the flags of `labctl labs`.
type Options struct {
	f *cmdutil.Factory

	// Lab is set for `labs show LAB`.
	Lab    string
	Lang   string
	Output string

	// Getenv reads LANG; os.Getenv by default.
	Getenv func(string) string
}

// NewCommand returns the labs command with its show subcommand.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	run := func(cmd *cobra.Command) error {
		if runF != nil {
			return runF(cmd.Context(), o)
		}
		return Run(cmd.Context(), o)
	}
	cmd := &cobra.Command{
		Use:   "labs",
		Short: "List the labs labctl can verify",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return run(cmd) },
	}
	cmd.PersistentFlags().StringVar(&o.Lang, "lang", "", "language of titles: en or ru (default from LANG)")
	cmdutil.AddOutputFlag(cmd, &o.Output)
	show := &cobra.Command{
		Use:     "show LAB",
		Short:   "List a lab's tasks and points",
		Example: "  labctl labs show lab-8.2\n  labctl labs show 3.4 --lang ru",
		Args:    cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			all, _ := f.Labs()
			return labs.IDs(all), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Lab = args[0]
			return run(cmd)
		},
	}
	cmd.AddCommand(show)
	return cmd
}

// Run lists the labs, or one lab's tasks.
func Run(_ context.Context, o *Options) error {
	s := o.f.IOStreams
	all, err := o.f.Labs()
	if err != nil {
		return err
	}
	lang, err := labs.ResolveLang(o.Lang, o.Getenv)
	if err != nil {
		return err
	}
	if o.Output == "" {
		o.Output = cmdutil.OutputText
	}
	if err := cmdutil.CheckOutput(o.Output); err != nil {
		return err
	}
	if o.Output != cmdutil.OutputText {
		return printStructured(o, all, lang)
	}
	if o.Lab == "" {
		// Grouped by module: on a terminal the module is named once, above
		// its labs; piped, every row carries it.
		t := s.NewTable("MODULE", "LAB", "TITLE", "PROJECT", "TASKS", "POINTS")
		prev := 0
		for _, l := range all {
			module := strconv.Itoa(l.Module)
			if s.IsTTY() && l.Module == prev {
				module = ""
			}
			prev = l.Module
			project := l.Project
			if project == "" {
				project = reference.Postgres
			}
			t.Row(module, l.ID, l.Title.In(lang), project, strconv.Itoa(len(l.Tasks)), strconv.Itoa(l.MaxPoints()))
		}
		return t.Print()
	}
	lab, err := labs.FindLab(all, o.Lab)
	if err != nil {
		return err
	}
	if s.IsTTY() {
		fmt.Fprintf(s.Out, "%s  %s\n", s.Styles().Bold.Render(lab.ID), s.Styles().Title.Render(lab.Title.In(lang)))
		if lab.Source != "" {
			fmt.Fprintln(s.Out, s.Styles().Muted.Render(lab.Source))
		}
		fmt.Fprintln(s.Out)
	}
	checksOf := checksByTask(lab)
	t := s.NewTable("TASK", "POINTS", "TITLE", "CHECKS")
	hidden := 0
	for _, task := range lab.Tasks {
		if task.Hidden {
			hidden++
			continue
		}
		title := task.Title.In(lang)
		t.Row(task.ID, strconv.Itoa(task.Points), report.CleanLine(title), strconv.Itoa(len(checksOf[task.ID])))
		if s.Verbose {
			t.Row("", "", "  "+task.Hint.In(lang), strings.Join(checksOf[task.ID], ", "))
		}
	}
	if err := t.Print(); err != nil {
		return err
	}
	if hidden > 0 {
		fmt.Fprintf(s.ErrOut, "%d hidden task(s) not shown\n", hidden)
	}
	if s.IsTTY() {
		fmt.Fprintf(s.Out, "\n%s\n", s.Styles().Muted.Render(fmt.Sprintf("labctl verify %s   ·   labctl solution %s", lab.ID, lab.ID)))
	}
	return nil
}

// LabSummary is one lab in `labctl labs -o json|yaml`.
type LabSummary struct {
	Module  int    `json:"module"`
	ID      string `json:"id"`
	Title   string `json:"title"`
	Project string `json:"project"`
	Tasks   int    `json:"tasks"`
	Points  int    `json:"points"`
}

// LabDetail is `labctl labs show LAB -o json|yaml`: the lab and its
// visible tasks.
type LabDetail struct {
	LabSummary
	Source   string       `json:"source,omitempty"`
	TaskList []TaskDetail `json:"taskList"`
}

// TaskDetail is one task of LabDetail.
type TaskDetail struct {
	ID     string   `json:"id"`
	Points int      `json:"points"`
	Title  string   `json:"title"`
	Hint   string   `json:"hint,omitempty"`
	Checks []string `json:"checks"`
}

func summarize(l *labs.Lab, lang string) LabSummary {
	project := l.Project
	if project == "" {
		project = reference.Postgres
	}
	return LabSummary{Module: l.Module, ID: l.ID, Title: l.Title.In(lang), Project: project, Tasks: len(l.Tasks), Points: l.MaxPoints()}
}

func printStructured(o *Options, all []*labs.Lab, lang string) error {
	out := o.f.IOStreams.Out
	if o.Lab == "" {
		list := make([]LabSummary, 0, len(all))
		for _, l := range all {
			list = append(list, summarize(l, lang))
		}
		return cmdutil.PrintStructured(out, o.Output, list)
	}
	lab, err := labs.FindLab(all, o.Lab)
	if err != nil {
		return err
	}
	checksOf := checksByTask(lab)
	d := LabDetail{LabSummary: summarize(lab, lang), Source: lab.Source, TaskList: []TaskDetail{}}
	for _, task := range lab.Tasks {
		if task.Hidden {
			continue
		}
		checks := checksOf[task.ID]
		if checks == nil {
			checks = []string{}
		}
		d.TaskList = append(d.TaskList, TaskDetail{ID: task.ID, Points: task.Points, Title: report.CleanLine(task.Title.In(lang)), Hint: task.Hint.In(lang), Checks: checks})
	}
	return cmdutil.PrintStructured(out, o.Output, d)
}

// checksByTask maps each task to the assertion steps that judge it.
func checksByTask(lab *labs.Lab) map[string][]string {
	checksOf := map[string][]string{}
	for _, sc := range lab.Scenarios {
		for _, st := range sc.Steps {
			if !st.IsAssertion() {
				continue
			}
			for _, task := range st.Tasks {
				checksOf[task] = append(checksOf[task], st.ID)
			}
		}
	}
	return checksOf
}
