// Package grade implements `labctl grade`: a class of operator projects
// graded unattended, each on its own fresh local cluster.
package grade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/policy"
	"github.com/labctl/labctl/internal/userr"
)

// Options are the arguments and flags of `labctl grade`.
type Options struct {
	f *cmdutil.Factory

	Lab         string
	Submissions []string
	Roster      string
	// ClassroomOrg and Assignment name a GitHub Classroom assignment's
	// repositories (ORG/PREFIX-USERNAME); ClassroomRepos lists them.
	ClassroomOrg   string
	Assignment     string
	ClassroomRepos string
	Jobs           int
	Timeout        time.Duration
	Out            string
	RevealHidden   bool
	Credit         string
	Lang           string
	BinDir         string
	// UnsafeNoSandbox runs the students' code unconfined.
	UnsafeNoSandbox bool
	// Open opens report.html with Opener when grading ends.
	Open   bool
	Opener Opener

	jobsSet bool // --jobs given: 0 then is a mistake, not "choose for me"
	// Policy is the instructor's grading policy file.
	Policy string
}

// NewCommand returns the grade command; runF replaces the work in tests of
// flag parsing.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f, Opener: SystemOpener}
	cmd := &cobra.Command{
		Use:   "grade LAB [SUBMISSION...]",
		Short: "Grade a class of operator projects, each on its own cluster",
		Long: `Grade submissions of a lab unattended. Each submission (a kubebuilder project)
is built, given its own fresh local cluster, its CRDs and RBAC installed, its
manager run under its own ServiceAccount with CPU-time, memory and wall-time
limits, checked with the lab's checks (as labctl verify does), and torn down.
A project that does not compile is a result (no points, the compiler's first
errors in the feedback), not a crash.

A SUBMISSION is a project directory; the student id is its name. With
--roster, a CSV with a header row names the students: a student column and a
dir column, or a repo column (git URL or path) with an optional ref column
(branch, tag or commit). Arguments after LAB then pick students of the roster.

GitHub Classroom: --roster takes the roster export (identifier,
github_username, ...) with --classroom-org ORG --assignment PREFIX, and
grades https://github.com/ORG/PREFIX-USERNAME for every linked student; or
--classroom-repos FILE lists the repositories, one URL per line, the student
id being the name after PREFIX-.

Points per task come from the lab. A task earns its points when every check
of it that ran passed (as labctl verify decides the task; a skipped check, one
that could not run here, neither earns nor costs points; a task with checks a
failed gate stopped is not judged and earns nothing, the mistake being charged
to the gate's own task), so a submission gets credit for each task it solved;
--credit checks gives partial credit inside a task instead (the share of its
checks that ran and passed, nothing when a gate check failed). A verification
with checks that could not decide (an API call failed them) is no
measurement: the checks run once more, time permitting, and the second
verification stands. Tasks marked hidden count but are withheld from the
students' feedback unless --reveal-hidden.

Written to --out: gradebook.csv (student, total, max, one column per task;
empty cells, not zeros, for a submission labctl could not grade: its failure,
retried once, is never the student's score), feedback/<student>.md,
results.json, junit.xml, report.html (the class at a glance: one
self-contained page to open in a browser or attach to a mail; --open opens
it) and logs/<student>/. Grading a student again replaces only that
student's row.`,
		Example: `  labctl grade lab-8.2 submissions/*
  labctl grade lab-8.2 --roster roster.csv --jobs 2 --out grades/lab-8.2
  labctl grade lab-8.2 --roster roster.csv alice      # re-grade one student
  labctl grade lab-8.2 submissions/* --open           # then show report.html
  labctl grade lab-8.2 --roster classroom_roster.csv --classroom-org k8s-course --assignment lab-8-2
  labctl grade lab-8.2 --classroom-repos repos.txt --assignment lab-8-2

  # roster.csv
  student,repo,ref
  alice,https://git.example.edu/alice/postgres-operator.git,lab-8.2
  bob,../bob-operator,`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Lab, o.Submissions = args[0], args[1:]
			o.jobsSet = cmd.Flags().Changed("jobs")
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Roster, "roster", "", "CSV of students: student,dir or student,repo,ref, or a GitHub Classroom roster export")
	cmd.Flags().StringVar(&o.ClassroomOrg, "classroom-org", "", "GitHub organisation of a GitHub Classroom assignment (with --roster and --assignment)")
	cmd.Flags().StringVar(&o.Assignment, "assignment", "", "prefix of the assignment's repositories: ORG/PREFIX-USERNAME")
	cmd.Flags().StringVar(&o.ClassroomRepos, "classroom-repos", "", "file listing the students' repositories, one URL per line")
	cmd.Flags().IntVar(&o.Jobs, "jobs", 0, fmt.Sprintf("submissions graded at once (default: one per core and 512 MiB free, here %d)", grade.DefaultJobs()))
	cmd.Flags().DurationVar(&o.Timeout, "timeout", grade.DefaultTimeout, "wall-time limit per submission, build to teardown")
	cmd.Flags().StringVar(&o.Out, "out", "", "output directory (default grades/LAB)")
	cmd.Flags().BoolVar(&o.RevealHidden, "reveal-hidden", false, "show hidden tasks' checks in the students' feedback")
	cmd.Flags().StringVar(&o.Credit, "credit", string(grade.CreditTasks), "scoring: tasks (a task's points when it passes) or checks (a task's points times the share of its checks that ran and passed)")
	cmd.Flags().StringVar(&o.Policy, "policy", "", "grading policy (YAML): per lab, step severity (fail, warn, hidden), points per task, course bugs; default: the lab's own")
	cmd.Flags().StringVar(&o.Lang, "lang", "", "language of titles, hints and feedback: en or ru (default from LANG)")
	cmd.Flags().BoolVar(&o.Open, "open", false, "open report.html in the browser when grading ends")
	cmd.Flags().StringVar(&o.BinDir, "bin-dir", "", "prebuilt etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok")
	cmd.Flags().BoolVar(&o.UnsafeNoSandbox, "unsafe-no-sandbox", false, "build and run the submissions as you, unconfined (only where `labctl doctor` says sandboxing is impossible; a hostile submission can then forge grades)")
	cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveFilterDirs
		}
		all, err := f.Labs()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return labs.IDs(all), cobra.ShellCompDirectiveNoFileComp
	}
	return cmd
}

// Run does the work of `labctl grade`.
func Run(ctx context.Context, o *Options) error {
	all, err := o.f.Labs()
	if err != nil {
		return err
	}
	lab, ok := labs.Find(all, o.Lab)
	if !ok {
		return userr.Usage(fmt.Sprintf("no lab %q", o.Lab), "labs: "+strings.Join(labs.IDs(all), ", "))
	}
	lab, policyName, err := policy.ApplyFile(o.Policy, lab)
	if err != nil {
		return err
	}
	if o.Jobs < 0 || o.jobsSet && o.Jobs == 0 {
		return userr.Usage("--jobs must be 1 or more", "omit it to let labctl choose")
	}
	if o.Timeout <= 0 {
		return userr.Usage("--timeout must be positive", "for example --timeout 10m")
	}
	lang, err := labs.ResolveLang(o.Lang, nil)
	if err != nil {
		return err
	}
	roster, err := readRoster(o)
	if err != nil {
		return err
	}
	subs, err := grade.Select(o.Submissions, roster)
	if err != nil {
		return err
	}
	out := o.Out
	if out == "" {
		out = filepath.Join("grades", lab.ID)
	}
	gb, err := grade.Run(ctx, grade.Options{
		Lab:          lab,
		Submissions:  subs,
		Jobs:         o.Jobs,
		Timeout:      o.Timeout,
		OutDir:       out,
		RevealHidden: o.RevealHidden,
		Credit:       grade.Credit(o.Credit),
		Lang:         lang,
		Streams:      o.f.IOStreams,
		BinDir:       o.BinDir,
		Version:      o.f.Version,

		UnsafeNoSandbox: o.UnsafeNoSandbox,
		Policy:          policyName,
	})
	if o.Open && gb != nil && ctx.Err() == nil { // graded, not interrupted
		openReport(o, out)
	}
	return err
}

// readRoster reads --roster (a roster or a GitHub Classroom export) or
// --classroom-repos; nil when neither is given.
func readRoster(o *Options) ([]grade.Submission, error) {
	var cl *grade.Classroom
	switch {
	case o.Roster != "" && o.ClassroomRepos != "":
		return nil, userr.Usage("--roster and --classroom-repos both list the class", "give one of them")
	case o.ClassroomOrg != "" && o.ClassroomRepos != "":
		return nil, userr.Usage("--classroom-repos already names the repositories", "drop --classroom-org (keep --assignment to strip the repositories' prefix)")
	case o.ClassroomOrg != "" && o.Roster == "":
		return nil, userr.Usage("--classroom-org needs the roster export", "pass --roster classroom_roster.csv")
	case o.ClassroomOrg != "" || (o.Assignment != "" && o.Roster != ""):
		cl = &grade.Classroom{Org: o.ClassroomOrg, Assignment: o.Assignment}
		if err := cl.Validate(); err != nil {
			return nil, userr.Usage(err.Error(), "pass --classroom-org ORG --assignment PREFIX for repositories ORG/PREFIX-USERNAME")
		}
	case o.Assignment != "" && o.ClassroomRepos == "":
		return nil, userr.Usage("--assignment needs --roster with --classroom-org, or --classroom-repos", "see labctl grade --help")
	}
	path := o.Roster
	if path == "" {
		path = o.ClassroomRepos
	}
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, userr.Usage(fmt.Sprintf("cannot read the class list: %v", err), "pass an existing file")
	}
	defer f.Close()
	abs, _ := filepath.Abs(path)
	if o.ClassroomRepos != "" {
		subs, err := grade.ParseRepoList(f, o.Assignment, filepath.Dir(abs))
		if err != nil {
			return nil, userr.Usage(err.Error(), "list one repository URL per line, named PREFIX-USERNAME with --assignment PREFIX")
		}
		return subs, nil
	}
	subs, unlinked, err := grade.ParseRosterWith(f, grade.RosterOptions{BaseDir: filepath.Dir(abs), Classroom: cl})
	if err != nil {
		return nil, userr.Usage(err.Error(), "the header names the columns: student,dir or student,repo,ref (or a GitHub Classroom export with --classroom-org)")
	}
	if len(unlinked) > 0 {
		fmt.Fprintf(o.f.IOStreams.ErrOut, "not graded: %d roster entries have no GitHub account linked (%s)\n", len(unlinked), strings.Join(unlinked, ", "))
	}
	return subs, nil
}
