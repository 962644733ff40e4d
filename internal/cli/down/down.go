// Package down implements `labctl down`.
package down

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/userr"
)

// Options are the flags of `labctl down`.
type Options struct {
	f        *cmdutil.Factory
	Provider string
	Name     string
}

// NewCommand returns the down command.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop and delete a cluster created by labctl up",
		Args:  cobra.NoArgs,
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
	return cmd
}

// Run does the work of `labctl down`.
func Run(ctx context.Context, o *Options) error {
	s := o.f.IOStreams
	provs, err := o.f.Providers.Select(ctx, o.Provider)
	if err != nil {
		return err
	}
	for _, p := range provs {
		// A cluster of the existing provider is the user's, never labctl's
		// to delete; looking there would only read (and trip over) the
		// user's kubeconfig.
		if len(provs) > 1 && cluster.UserOwned(p) {
			continue
		}
		if _, err := p.Status(ctx, o.Name); errors.Is(err, cluster.ErrNotFound) {
			continue
		}
		step := s.StartStep(fmt.Sprintf("Deleting %s cluster %q", p.Name(), o.Name))
		err := p.Down(ctx, o.Name)
		var warn *cluster.Warning
		if errors.As(err, &warn) {
			step.Done()
			fmt.Fprintln(s.ErrOut, s.Styles().Warning.Render("warning:")+" "+userr.Message(warn.Err))
			return nil
		}
		if err != nil {
			step.Fail()
			return err
		}
		step.Done()
		return nil
	}
	// Like `kind delete cluster`: deleting what is not there succeeds, so
	// scripts can clean up without checking first.
	fmt.Fprintf(s.ErrOut, "No cluster named %q: nothing to delete (`labctl status` lists the clusters labctl manages).\n", o.Name)
	return nil
}
