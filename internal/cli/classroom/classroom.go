// Package classroom implements `labctl classroom init LAB`: the GitHub
// Actions workflow that grades a lab in every student's repository of a
// GitHub Classroom assignment.
package classroom

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/classroom"
	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/policy"
	"github.com/labctl/labctl/internal/userr"
)

// Options are the flags of `labctl classroom init`.
type Options struct {
	Streams *iostreams.IOStreams
	// BuiltVersion is this labctl's version (the -X main.version stamp).
	BuiltVersion string
	// Labs is the lab catalogue the command reads (the factory's).
	Labs func() ([]*labs.Lab, error)

	Lab           string
	Provider      string
	Dir           string
	Force         bool
	LabctlVersion string
	// Lang, Credit and Policy are what verify runs with in the workflow;
	// Policy is a file here, copied into the repository (PolicyPath).
	Lang   string
	Credit string
	Policy string
}

// NewCommand returns the classroom command group; runF replaces the work
// of init in tests of flag parsing.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	group := &cobra.Command{
		Use:   "classroom",
		Short: "Grade a lab with GitHub Classroom, each student's repository in its own runner",
	}
	o := &Options{Streams: f.IOStreams, BuiltVersion: f.Version, Labs: f.Labs}
	initCmd := &cobra.Command{
		Use:   "init LAB",
		Short: "Write the GitHub Actions workflow that grades LAB in a template repository",
		Long: `Write ` + classroom.WorkflowPath + ` into a template repository of a GitHub
Classroom assignment. On every push to a student's repository it checks out
the code, sets up Go, installs this version of labctl, starts a cluster
(kind in the runner's Docker, or the local provider with its control-plane
binaries cached), deploys the student's operator, runs labctl verify LAB -o
classroom and reports one test per task to GitHub Classroom with the lab's
points. labctl's logs are uploaded as an artifact when the run fails.

--lang, --credit and --policy are what verify runs with: the language of the
feedback, how tasks are scored, and an instructor's grading policy (as labctl
grade takes; it is copied to ` + classroom.PolicyPath + `). Classroom's points
are advisory: students can edit the workflow; labctl grade is the trusted path.

An existing workflow is not replaced unless --force.`,
		Example: `  labctl classroom init lab-8.2
  labctl classroom init lab-3.4 --provider local --dir ~/course-template
  labctl classroom init lab-8.2 --labctl-version v0.4.0 --force
  labctl classroom init lab-8.2 --lang ru --credit checks --policy fall-2026.yaml`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			all, _ := f.Labs()
			return labs.IDs(all), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Lab = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return Run(cmd.Context(), o)
		},
	}
	initCmd.Flags().StringVar(&o.Provider, "provider", classroom.ProviderKind, "cluster on the runner: "+strings.Join(classroom.Providers, " or "))
	initCmd.Flags().StringVar(&o.Dir, "dir", ".", "the template repository")
	initCmd.Flags().BoolVar(&o.Force, "force", false, "replace an existing workflow")
	initCmd.Flags().StringVar(&o.LabctlVersion, "labctl-version", "", "labctl version the workflow installs (default: this labctl's)")
	initCmd.Flags().StringVar(&o.Lang, "lang", "", "language of the students' feedback: en or ru (default: English)")
	initCmd.Flags().StringVar(&o.Credit, "credit", string(grade.CreditTasks), "how tasks are scored: tasks or checks (as labctl grade)")
	initCmd.Flags().StringVar(&o.Policy, "policy", "", "grading policy file (as labctl grade takes), copied into the repository")
	_ = initCmd.RegisterFlagCompletionFunc("provider", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return classroom.Providers, cobra.ShellCompDirectiveNoFileComp
	})
	_ = initCmd.RegisterFlagCompletionFunc("lang", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return labs.Langs, cobra.ShellCompDirectiveNoFileComp
	})
	_ = initCmd.RegisterFlagCompletionFunc("credit", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var c []string
		for _, x := range grade.Credits {
			c = append(c, string(x))
		}
		return c, cobra.ShellCompDirectiveNoFileComp
	})
	group.AddCommand(initCmd, newFailCommand(f))
	return group
}

// newFailCommand returns `labctl classroom fail LAB --reason TEXT`: the
// workflow's report when the operator could not be built or deployed.
func newFailCommand(f *cmdutil.Factory) *cobra.Command {
	var reason, lang string
	cmd := &cobra.Command{
		Use:   "fail LAB --reason TEXT",
		Short: "Report every task of LAB failed, with a reason, as verify -o classroom does",
		Long: `Print what verify -o classroom prints (one result per task) with every task
failed and worth nothing, the reason as its feedback. The Classroom workflow
runs it when labctl up fails (the operator does not build or deploy), so the
student sees why and Classroom records 0 instead of no grade.`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			all, _ := f.Labs()
			return labs.IDs(all), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			all, err := f.Labs()
			if err != nil {
				return err
			}
			lab, err := labs.FindLab(all, args[0])
			if err != nil {
				return err
			}
			lab = checks.ForGrading(lab) // the runner is not the student's machine
			if strings.TrimSpace(reason) == "" {
				return userr.Usage("no reason given", "pass --reason with what went wrong, e.g. labctl up's last line")
			}
			l, err := labs.ResolveLang(lang, nil)
			if err != nil {
				return err
			}
			if err := classroom.WriteResult(f.IOStreams.Out, lab, classroom.FailedResult(lab, l, reason)); err != nil {
				return err
			}
			return &cmdutil.SilentError{Code: userr.ExitChecks}
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "what went wrong (every task's feedback)")
	cmd.Flags().StringVar(&lang, "lang", "", "language of the task titles: en or ru")
	return cmd
}

// Run writes the workflow.
func Run(_ context.Context, o *Options) error {
	all, err := o.Labs()
	if err != nil {
		return err
	}
	lab, err := labs.FindLab(all, o.Lab)
	if err != nil {
		return err
	}
	// A runner is not the student's machine: the tasks only that machine
	// could show (the tools a lab installs) get no test of their own.
	lab = checks.ForGrading(lab)
	if !classroom.SupportsProvider(o.Provider) {
		return userr.Usage(fmt.Sprintf("the workflow cannot use provider %q", o.Provider), "use --provider kind (GitHub's runners have Docker) or --provider local")
	}
	if o.LabctlVersion != "" {
		if err := classroom.ValidLabctlVersion(o.LabctlVersion); err != nil {
			return userr.Usage(err.Error(), "pass --labctl-version with a tag of github.com/labctl/labctl, e.g. v0.4.0")
		}
	}
	version := classroom.InstallVersion(o.LabctlVersion, o.BuiltVersion)
	if version == "" {
		return userr.Usage(fmt.Sprintf("this labctl (%s) was built without a release version, so the workflow cannot pin one", o.BuiltVersion),
			"pass --labctl-version with a tag of github.com/labctl/labctl (e.g. v0.4.0), or --labctl-version latest")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return userr.Usage(fmt.Sprintf("%s is not a directory", dir), "pass --dir with the template repository's directory")
	}
	if o.Credit != "" && !slices.Contains(grade.Credits, grade.Credit(o.Credit)) {
		return userr.Usage(fmt.Sprintf("unknown credit %q", o.Credit), "use --credit tasks or --credit checks")
	}
	if o.Lang != "" {
		if o.Lang, err = labs.ResolveLang(o.Lang, nil); err != nil {
			return err
		}
	}
	var policyText []byte
	if o.Policy != "" {
		if _, _, err := policy.ApplyFile(o.Policy, lab); err != nil {
			return err
		}
		if policyText, err = os.ReadFile(o.Policy); err != nil {
			return userr.Usage("cannot read the policy: "+err.Error(), "pass --policy with a YAML file")
		}
	}
	wo := classroom.WorkflowOptions{Lab: lab, Provider: o.Provider, LabctlVersion: version, Lang: o.Lang}
	if o.Credit != string(grade.CreditTasks) {
		wo.Credit = o.Credit
	}
	if policyText != nil {
		wo.PolicyFile = classroom.PolicyPath
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		wo.GoVersionFile = "go.mod"
	}
	var b bytes.Buffer
	if err := classroom.RenderWorkflow(&b, wo); err != nil {
		return err
	}
	path := filepath.Join(dir, filepath.FromSlash(classroom.WorkflowPath))
	if _, err := os.Stat(path); err == nil && !o.Force {
		return userr.Usage(fmt.Sprintf("%s already exists", path), "nothing was written; rerun with --force to replace it")
	}
	if policyText != nil {
		if err := writeFile(filepath.Join(dir, filepath.FromSlash(classroom.PolicyPath)), policyText); err != nil {
			return userr.Wrap(err, userr.ExitFailure, "cannot write the policy: "+err.Error(), "check that "+dir+" is writable")
		}
	}
	if err := writeFile(path, b.Bytes()); err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot write the workflow: "+err.Error(), "check that "+dir+" is writable")
	}
	s := o.Streams
	fmt.Fprintf(s.Out, "Wrote %s: %s, %d tasks, %d points, provider %s, labctl %s.\n",
		path, lab.ID, len(lab.Tasks), lab.MaxPoints(), o.Provider, version)
	if policyText != nil {
		fmt.Fprintf(s.Out, "Wrote %s: the grading policy verify applies.\n", filepath.Join(dir, filepath.FromSlash(classroom.PolicyPath)))
	}
	fmt.Fprintln(s.Out, "Commit it to the assignment's template repository; each student's push is graded in its own runner.")
	return nil
}

// writeFile replaces path with data in one rename, so a failed write
// leaves the old workflow (or none) behind, never half of one.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".classroom-*.yml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
