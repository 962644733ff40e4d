// Package up implements `labctl up`: a cluster, the operator image (kind)
// or process (local), and the operator deployed, in one command.
package up

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/userr"
)

// Options are the flags of `labctl up`.
type Options struct {
	f *cmdutil.Factory

	Provider   string
	Name       string
	Project    string
	Lab        string
	Reference  bool
	NoOperator bool
	Kubeconfig string
	BinDir     string
	Image      string
}

// NewCommand returns the up command; runF replaces the work in tests of
// flag parsing.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create the course cluster and deploy the operator",
		Long: `Create (or reuse) the course cluster and deploy an operator into it.

Providers: kind (Docker or Podman), local (a real control plane run as local
processes, pods simulated by kwok; needs only Go), existing (your current
kubeconfig context). The default picks kind when a container engine works,
else local.

With --project, your kubebuilder project is deployed; without it, the
course's reference operator is: the Database operator, or with --lab the
reference of that lab's project (the Hello World operator for labs 2.4 and
3.1; none for lab 1.4, whose CRD you apply yourself).`,
		Example: `  labctl up
  labctl up --lab 2.4
  labctl up --project ~/postgres-operator
  labctl up --provider local --name lab1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Provider, "provider", cluster.ProviderAuto, "cluster provider: auto, kind, local or existing")
	cmd.Flags().StringVar(&o.Name, "name", cluster.DefaultName, "cluster name")
	cmd.Flags().StringVar(&o.Project, "project", "", "kubebuilder project to deploy (default: the reference operator)")
	cmd.Flags().StringVar(&o.Lab, "lab", "", "deploy the reference operator of this lab's project (e.g. 2.4: the Hello World operator)")
	cmd.Flags().BoolVar(&o.Reference, "reference", false, "deploy the reference operator even inside a project directory")
	cmd.Flags().BoolVar(&o.NoOperator, "no-operator", false, "create the cluster only")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig to merge the cluster's context into (default $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&o.BinDir, "bin-dir", "", "local provider: prebuilt etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok")
	cmd.Flags().StringVar(&o.Image, "image", "", "kind provider: node image to use instead of the pinned kindest/node (e.g. the name labctl build node-image printed)")
	_ = cmd.RegisterFlagCompletionFunc("provider", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return f.Providers.Names(), cobra.ShellCompDirectiveNoFileComp
	})
	cmd.MarkFlagsMutuallyExclusive("project", "reference")
	cmd.MarkFlagsMutuallyExclusive("project", "no-operator")
	cmd.MarkFlagsMutuallyExclusive("project", "lab")
	_ = cmd.RegisterFlagCompletionFunc("lab", f.CompleteLabs)
	return cmd
}

// Run does the work of `labctl up`.
func Run(ctx context.Context, o *Options) error {
	s := o.f.IOStreams
	// Check the inputs before starting anything: a typo in --project must
	// not cost a cluster start (or, the first time, a control-plane build).
	if o.Project != "" {
		dir, err := cmdutil.Dir(o.Project, "--project")
		if err != nil {
			return err
		}
		if _, err := deploy.LoadProject(dir); err != nil {
			return err
		}
		o.Project = dir
	}
	project, deployOperator, err := o.projectToDeploy()
	if err != nil {
		return err
	}
	prov, reason, err := o.f.Providers.Resolve(ctx, o.Provider)
	if err != nil {
		return err
	}
	if reason != "" {
		fmt.Fprintf(s.ErrOut, "Provider: %s (%s)\n", prov.Name(), reason)
	}
	opts := cluster.UpOptions{Name: o.Name, Streams: s, KubeconfigPath: o.Kubeconfig, BinDir: o.BinDir, NodeImage: o.Image}
	c, err := prov.Up(ctx, opts)
	auto := o.Provider == "" || o.Provider == cluster.ProviderAuto
	if err != nil && auto && ctx.Err() == nil {
		// "auto" promises whatever works: an engine that answers `info`
		// may still be unable to run kind (no image pulls, rootless
		// limits). The fallback (local) provider needs only Go.
		if fallback := o.f.Providers.FallbackFor(prov); fallback != nil {
			fmt.Fprintf(s.ErrOut, "%s did not work: %s\nUsing the %s provider instead.\n", prov.Name(), userr.Message(err), fallback.Name())
			prov = fallback
			c, err = prov.Up(ctx, opts)
		}
	}
	if err != nil {
		return err
	}
	if c.Reused {
		fmt.Fprintf(s.ErrOut, "%s cluster %q is already running.\n", prov.Name(), c.Name)
	}
	if !o.NoOperator && deployOperator {
		if _, err := c.RunOperator(ctx, project, cluster.RunOptions{Streams: s}); err != nil {
			return err
		}
	}
	st := s.Styles()
	fmt.Fprintf(s.Out, "%s cluster %s is ready; kubectl context %s\n", st.Success.Render("✓"), st.Bold.Render(c.Name), st.Bold.Render(c.Context))
	fmt.Fprintf(s.Out, "  kubeconfig: %s\n", c.Kubeconfig)
	if next := o.nextVerify(c.Name); next != "" {
		fmt.Fprintln(s.Out, "  next: "+next)
	}
	return nil
}

// nextVerify is the verify the user most likely runs next: the lab asked
// for, else the first not yet passed of the deployed operator's labs (a
// project of the user's is taken for the Database operator, the course's
// main line).
func (o *Options) nextVerify(clusterName string) string {
	all, err := o.f.Labs()
	if err != nil {
		return ""
	}
	if o.Lab != "" {
		if lab, ok := labs.Find(all, o.Lab); ok {
			return cmdutil.VerifyCommand(lab.ID, clusterName)
		}
	}
	if next := cmdutil.NextLab(all, ""); next != nil {
		return cmdutil.VerifyCommand(next.ID, clusterName)
	}
	return ""
}

// projectToDeploy is --project, or with --lab the directory of that lab's
// reference project; withOperator is false for a project without an operator.
func (o *Options) projectToDeploy() (dir string, withOperator bool, err error) {
	if o.Lab == "" {
		return o.Project, true, nil
	}
	all, err := o.f.Labs()
	if err != nil {
		return "", false, err
	}
	lab, ok := labs.Find(all, o.Lab)
	if !ok {
		return "", false, userr.Usage(fmt.Sprintf("there is no lab %q", o.Lab), "`labctl labs` lists them")
	}
	ref, err := reference.Lookup(lab.Project)
	if err != nil {
		return "", false, err
	}
	if !ref.Operator || lab.Operatorless {
		fmt.Fprintf(o.f.IOStreams.ErrOut, "%s needs no operator: none is deployed.\n", lab.ID)
		return "", false, nil
	}
	p, err := deploy.ResolveProjectFor("", ref.Name)
	if err != nil {
		return "", false, err
	}
	return p.Dir, true, nil
}
