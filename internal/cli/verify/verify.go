// Package verify implements `labctl verify LAB`: run a lab's checks
// against the cluster and the operator running in it, print the report,
// and exit 0 only when every task passed (3 otherwise).
package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/classroom"
	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/policy"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/runguard"
	"github.com/labctl/labctl/internal/userr"
	labverify "github.com/labctl/labctl/internal/verify"
)

// Options are the flags and dependencies of `labctl verify`.
type Options struct {
	f *cmdutil.Factory

	Lab      string
	Tasks    []string
	Project  string
	Output   string
	Keep     bool
	Timeout  time.Duration
	Lang     string
	Name     string
	Provider string
	// Policy is an instructor's grading policy file (as labctl grade
	// takes), applied to the lab before it runs.
	Policy string
	// Credit is how -o classroom scores tasks (as labctl grade's --credit).
	Credit string

	// FindOperator finds the operator running in the cluster; the default
	// is labverify.FindOperatorFor the lab's reference project.
	FindOperator labverify.Finder
	// Getenv reads the environment (LANG); os.Getenv by default.
	Getenv func(string) string
}

// NewCommand returns the verify command; runF replaces the work in tests of
// flag parsing.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	cmd := &cobra.Command{
		Use:   "verify LAB",
		Short: "Check each task of a lab against the cluster and your operator",
		Long: `Run the checks of a lab against the running cluster and the operator
deployed in it (labctl up): every task of the lab text, with evidence when
one fails: what was expected and observed, the last state of the object,
its events and an excerpt of the operator's log.

Each run works in a fresh namespace labctl-<lab>-<random> and deletes it
afterwards (--keep leaves it for inspection). Exit status 0 means every
task passed, 3 that at least one did not.

-o classroom is for GitHub Classroom (see labctl classroom init): stdout
gets one line, the base64-encoded result its autograding reporter reads
(one test per task, scored as labctl grade does: checks that could not
decide are run once more), and stderr the text report.`,
		Example: `  labctl verify lab-8.2
  labctl verify 3.4 --task 6.2
  labctl verify lab-8.2 --project ~/postgres-operator -o junit > report.xml
  labctl verify lab-8.2 -o classroom | base64 -d    # what GitHub Classroom reads`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			all, _ := f.Labs()
			return labs.IDs(all), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = cmdutil.ClusterName(cmd, o.Name)
			o.Lab = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringSliceVar(&o.Tasks, "task", nil, "verify only these tasks (e.g. 6.2; repeat or separate with commas)")
	cmd.Flags().StringVar(&o.Project, "project", "", "your kubebuilder project, for the checks that read the source (default: the deployed operator's)")
	cmd.Flags().StringVarP(&o.Output, "output", "o", report.FormatTable, "output format: "+strings.Join(formats, ", "))
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "keep the namespace and its objects after the run")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 15*time.Minute, "give up the whole run after this long")
	cmd.Flags().StringVar(&o.Lang, "lang", "", "language of titles and hints: en or ru (default from LANG)")
	cmd.Flags().StringVar(&o.Policy, "policy", "", "grading policy (YAML, as labctl grade takes): step severities, points, course bugs")
	cmd.Flags().StringVar(&o.Credit, "credit", string(grade.CreditTasks), "how -o classroom scores a task: tasks or checks (as labctl grade)")
	cmd.Flags().StringVar(&o.Name, "name", cluster.DefaultName, "cluster name")
	cmd.Flags().StringVar(&o.Provider, "provider", cluster.ProviderAuto, "provider of the cluster (auto tries each)")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return formats, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("lang", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return labs.Langs, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("task", f.CompleteTasks)
	return cmd
}

// Run does the work of `labctl verify`, in four phases: plan (flags and
// the lab, before touching a cluster), locate (the cluster, the operator
// and the project to judge), check (the lab's checks, with progress) and
// finish (record a pass, write the report, the exit code).
func Run(ctx context.Context, o *Options) error {
	p, err := o.plan()
	if err != nil {
		return err
	}
	interrupted := ctx // cancelled only by Ctrl-C or SIGTERM
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	// controller-runtime's client wants a logger; verify reports through
	// its own output, not klog-style lines.
	ctrllog.SetLogger(logr.Discard())

	c, target, err := o.locate(ctx, p)
	if err != nil {
		return err
	}
	ns := checks.NamespaceName(p.lab.ID)
	if !o.Keep { // a kept namespace is the user's to inspect, not a leftover
		forget := runguard.RememberNamespace(c, ns)
		defer forget(context.WithoutCancel(ctx))
	}
	// A cluster that stops answering must not be mistaken for an operator
	// that fails its tasks: the watchdog ends the run when it happens.
	ctx, stopWatchdog := runguard.Watch(ctx, c)
	defer stopWatchdog()

	rep, err := o.measure(ctx, func(ctx context.Context) (*report.Report, error) {
		return o.check(ctx, interrupted, p, c, target, ns)
	})
	if err != nil {
		return err
	}
	return o.finish(ctx, p, c, rep)
}

// measure runs the checks once; for a grade (-o classroom), as labctl
// grade does, checks that could not decide run once more
// (verify.Measure), and stderr says so.
func (o *Options) measure(ctx context.Context, check func(context.Context) (*report.Report, error)) (*report.Report, error) {
	if o.Output != classroom.Format {
		return check(ctx)
	}
	rep, note, err := labverify.Measure(ctx, check)
	if note != "" {
		fmt.Fprintln(o.f.IOStreams.ErrOut, note)
	}
	return rep, err
}

// plan is what verify knows before it touches a cluster: every flag
// checked, the lab with the instructor's policy applied.
type plan struct {
	all     []*labs.Lab
	lab     *labs.Lab
	lang    string
	ref     reference.Project
	project string // --project, absolute; "" to find it
}

func (o *Options) plan() (*plan, error) {
	all, err := o.f.Labs()
	if err != nil {
		return nil, err
	}
	lab, err := labs.FindLab(all, o.Lab)
	if err != nil {
		return nil, err
	}
	if lab, _, err = policy.ApplyFile(o.Policy, lab); err != nil {
		return nil, err
	}
	if o.Output == classroom.Format {
		// In a Classroom runner, which is not the student's machine.
		lab = checks.ForGrading(lab)
	}
	if o.Credit == "" {
		o.Credit = string(grade.CreditTasks)
	}
	if !slices.Contains(grade.Credits, grade.Credit(o.Credit)) {
		return nil, userr.Usage(fmt.Sprintf("unknown credit %q", o.Credit), "use --credit tasks or --credit checks")
	}
	for _, t := range o.Tasks {
		if _, ok := lab.Task(t); !ok {
			var ids []string
			for _, lt := range lab.Tasks {
				ids = append(ids, lt.ID)
			}
			return nil, userr.Usage(fmt.Sprintf("%s has no task %q", lab.ID, t), "its tasks: "+strings.Join(ids, ", "))
		}
	}
	if !slices.Contains(formats, o.Output) {
		return nil, userr.Usage(fmt.Sprintf("unknown output format %q", o.Output), "use -o "+strings.Join(formats, ", -o "))
	}
	lang, err := labs.ResolveLang(o.Lang, o.Getenv)
	if err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		return nil, userr.Usage(fmt.Sprintf("--timeout must be positive, got %s", o.Timeout), "for example --timeout 15m")
	}
	ref, err := reference.Lookup(lab.Project)
	if err != nil {
		return nil, err
	}
	p := &plan{all: all, lab: lab, lang: lang, ref: ref}
	if o.Project != "" {
		abs, err := cmdutil.Dir(o.Project, "--project")
		if err != nil {
			return nil, err
		}
		if err := labverify.CheckProject(abs, ref); err != nil {
			return nil, userr.Usage(err.Error(), "point --project at the directory where you ran `kubebuilder init`")
		}
		p.project = abs
	}
	return p, nil
}

// locate finds the cluster, then the operator and project to judge in it,
// and warns when the operator running is another lab's.
func (o *Options) locate(ctx context.Context, p *plan) (*cluster.Cluster, *labverify.Target, error) {
	c, err := o.f.Providers.FindCluster(ctx, o.Provider, o.Name)
	if err != nil {
		return nil, nil, err
	}
	runguard.CleanStaleNamespaces(ctx, c)
	wd, _ := os.Getwd()
	target, err := labverify.Resolve(ctx, labverify.Request{Cluster: c, Reference: p.ref, Project: p.project, WorkDir: wd, Find: o.FindOperator, Operatorless: p.lab.Operatorless})
	if err != nil {
		return nil, nil, err
	}
	if target.OtherProject != "" {
		fmt.Fprintf(o.f.IOStreams.ErrOut, "warning: the operator running is %s, but %s builds on %s: run `labctl up --lab %s` (or --project with your project) first\n",
			target.OtherProject, p.lab.ID, p.ref.ProjectName, p.lab.ID)
	}
	return c, target, nil
}

// check runs the lab's checks with a progress line, and turns a run that
// did not end on its own (Ctrl-C, the cluster gone, --timeout) into the
// error that says so: those tasks were not judged.
func (o *Options) check(ctx, interrupted context.Context, p *plan, c *cluster.Cluster, target *labverify.Target, ns string) (*report.Report, error) {
	total := checks.CountChecks(p.lab, o.Tasks)
	step := o.f.IOStreams.StartStep(fmt.Sprintf("Verifying %s on %s cluster %s", p.lab.ID, c.Provider, c.Name))
	done, failed := 0, 0
	rep, err := checks.Run(ctx, checks.Options{
		Lab:        p.lab,
		Cluster:    c,
		Operator:   target.Operator,
		ProjectDir: target.Project,
		Lang:       p.lang,
		Tasks:      o.Tasks,
		Keep:       o.Keep,
		Namespace:  ns,
		OnCheck: func(ch *report.CheckResult) {
			done++ // OnCheck calls are serialised by the engine
			if ch.Status == report.Fail || ch.Status == report.Error {
				failed++
			}
			detail := fmt.Sprintf("%d/%d checks", done, total)
			if failed > 0 {
				detail += fmt.Sprintf(", %d not passed", failed)
			}
			step.Update("%s", detail)
		},
	})
	if interrupted.Err() != nil {
		step.Fail()
		again := cmdutil.Invocation() + " verify " + p.lab.ID
		if c.Name != cluster.DefaultName {
			again += " --name " + c.Name
		}
		return nil, userr.Wrap(interrupted.Err(), userr.ExitInterrupted, "interrupted: the tasks were not run to the end and are not judged",
			"run `"+again+"` again when you are ready")
	}
	if gone := runguard.Gone(ctx, c, err != nil || !rep.AllPassed()); gone != nil {
		step.Fail()
		return nil, userr.Wrap(gone, userr.ExitFailure, fmt.Sprintf("the cluster stopped answering during verify (%s); the tasks were not judged", userr.Message(gone)),
			"`labctl status` shows which component stopped; `labctl up` restarts it, then verify again")
	}
	if err != nil {
		step.Fail()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("verify did not finish within %s", o.Timeout), "raise --timeout, or check the cluster with `labctl status`")
		}
		return nil, err
	}
	if rep.AllPassed() {
		step.Done(fmt.Sprintf("%d/%d tasks passed", rep.Summary.Passed, rep.Summary.Tasks))
	} else {
		step.Fail()
	}
	return rep, nil
}

// finish records a whole lab passed (the hints then move on to the next),
// writes the report, and returns the exit status: 3 when a task failed.
func (o *Options) finish(ctx context.Context, p *plan, c *cluster.Cluster, rep *report.Report) error {
	s := o.f.IOStreams
	next := ""
	if rep.AllPassed() && len(o.Tasks) == 0 {
		if err := cmdutil.RecordPassed(p.lab.ID); err != nil {
			fmt.Fprintf(s.ErrOut, "warning: cannot record that %s passed (%v); hints will not move on to the next lab\n", p.lab.ID, err)
		} else if n := cmdutil.NextLab(p.all, p.lab.Project); n != nil && n.ID != p.lab.ID {
			next = "next: " + cmdutil.VerifyCommand(n.ID, c.Name)
		}
	}
	if err := write(s, p.lab, rep, o.Output, grade.Credit(o.Credit)); err != nil {
		return err
	}
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		fmt.Fprintf(s.ErrOut, "verify ran out of time (--timeout %s): checks still running were reported as errors\n", o.Timeout)
	}
	if next != "" {
		fmt.Fprintln(s.ErrOut, next)
	}
	if !rep.AllPassed() {
		return &cmdutil.SilentError{Code: userr.ExitChecks}
	}
	return nil
}

// formats are the -o values: the report's own and GitHub Classroom's.
var formats = append(slices.Clone(report.Formats), classroom.Format)

// write prints the report. For GitHub Classroom stdout carries only the
// value its reporter reads; the text report goes to the log on stderr.
func write(s *iostreams.IOStreams, lab *labs.Lab, rep *report.Report, format string, credit grade.Credit) error {
	if format != classroom.Format {
		return report.Write(s, rep, format)
	}
	if err := report.WriteText(s.ErrOut, s.Styles(), rep, s.Verbose); err != nil {
		return err
	}
	return classroom.Write(s.Out, lab, rep, credit)
}
