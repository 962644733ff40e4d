// Package reset implements `labctl reset`: the flags, then internal/reset
// removes what the labs left in the cluster; --operator redeploys the
// operator, --cluster recreates the whole cluster instead.
package reset

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/reset"
	"github.com/labctl/labctl/internal/userr"
)

// Options are the flags of `labctl reset`.
type Options struct {
	f *cmdutil.Factory

	Provider      string
	Name          string
	Namespace     string
	AllNamespaces bool
	Operator      bool
	Cluster       bool
	Force         bool
	Project       string
	Timeout       time.Duration
}

// NewCommand returns the reset command; runF replaces the work in tests of
// flag parsing.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Delete the labs' objects (Databases, Backups, labctl namespaces) and wait for garbage collection",
		Long: `Delete what the labs left in the cluster and wait, watching, until garbage
collection has removed their children (whatever they own: StatefulSets,
Services, Secrets, Jobs).

Deleted: the objects of every lab's own kinds (Databases, Backups,
HelloWorlds, Websites) in the namespace (default: "default"; every namespace
with --all-namespaces), the data PVCs of the StatefulSets they owned, and the
namespaces labctl created (label app.kubernetes.io/managed-by=labctl).
Nothing else: leftovers labctl does not recognise (a namespace named labctl-*
without the label, a database StatefulSet, Service or Secret that no Database
owns) are listed and kept, unless --force. --force also removes finalizers
that keep a Database from being deleted when no operator runs to remove them.

--operator redeploys the operator afterwards; --cluster deletes and recreates
the whole cluster instead.`,
		Example: `  labctl reset
  labctl reset --all-namespaces --operator
  labctl reset --cluster`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Name = cmdutil.ClusterName(cmd, o.Name)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Provider, "provider", cluster.ProviderAuto, "provider of the cluster (auto tries each)")
	cmd.Flags().StringVar(&o.Name, "name", cluster.DefaultName, "cluster name")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "default", "namespace whose lab objects (Databases, Backups, ...) are deleted")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "delete lab objects in every namespace")
	cmd.Flags().BoolVar(&o.Operator, "operator", false, "redeploy the operator afterwards")
	cmd.Flags().BoolVar(&o.Cluster, "cluster", false, "delete and recreate the whole cluster (then deploy the operator)")
	cmd.Flags().BoolVar(&o.Force, "force", false, "also delete leftovers labctl does not recognise, and remove stuck finalizers")
	cmd.Flags().StringVar(&o.Project, "project", "", "project to deploy with --operator/--cluster (default: the reference operator)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", reset.DefaultTimeout, "how long to wait for deletion and garbage collection")
	cmd.MarkFlagsMutuallyExclusive("cluster", "all-namespaces")
	cmd.MarkFlagsMutuallyExclusive("cluster", "force")
	return cmd
}

// Run does the work of `labctl reset`.
func Run(ctx context.Context, o *Options) error {
	s := o.f.IOStreams
	c, err := o.f.Providers.FindCluster(ctx, o.Provider, o.Name)
	if err != nil {
		if errors.Is(err, cluster.ErrNotFound) {
			return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("there is no running cluster named %q to reset", o.Name),
				"run `labctl up` to create it (or pass --name / --provider)")
		}
		return err
	}
	if o.Cluster {
		return recreate(ctx, o, c)
	}
	all, err := o.f.Labs()
	if err != nil {
		return err
	}
	res, err := reset.Run(ctx, reset.Options{
		Config:        c.Config,
		Labs:          all,
		Namespace:     o.Namespace,
		AllNamespaces: o.AllNamespaces,
		Force:         o.Force,
		Timeout:       o.Timeout,
		Streams:       s,
	})
	if err != nil {
		return err
	}
	res.Print(s)
	if o.Operator {
		if _, err := c.RunOperator(ctx, o.Project, cluster.RunOptions{Streams: s}); err != nil {
			return err
		}
		fmt.Fprintln(s.Out, s.Styles().Success.Render("✓")+" operator redeployed")
	}
	return nil
}

func recreate(ctx context.Context, o *Options, c *cluster.Cluster) error {
	s := o.f.IOStreams
	prov, ok := o.f.Providers.ByName[c.Provider]
	if !ok {
		return userr.New(fmt.Sprintf("unknown provider %q for cluster %q", c.Provider, c.Name), "run `labctl down` and `labctl up`")
	}
	step := s.StartStep(fmt.Sprintf("Deleting %s cluster %q", prov.Name(), c.Name))
	if err := prov.Down(ctx, c.Name); err != nil {
		step.Fail()
		return err
	}
	step.Done()
	nc, err := prov.Up(ctx, cluster.UpOptions{Name: c.Name, Streams: s})
	if err != nil {
		return err
	}
	if nc.Operators != nil {
		if _, err := nc.RunOperator(ctx, o.Project, cluster.RunOptions{Streams: s}); err != nil {
			return err
		}
	}
	fmt.Fprintf(s.Out, "%s %s cluster %s recreated; kubectl context %s\n", s.Styles().Success.Render("✓"), prov.Name(), c.Name, nc.Context)
	return nil
}
