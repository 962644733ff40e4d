// Package doctor implements `labctl doctor`: the flags, then internal/doctor
// probes the machine and prints one row per prerequisite; the exit code is
// 4 when any probe fails.
package doctor

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/doctor"
	"github.com/labctl/labctl/internal/userr"
)

// Options are the flags and dependencies of `labctl doctor`.
type Options struct {
	f *cmdutil.Factory
	// Doctor says what to probe (--name) and with what; NewCommand fills
	// in the kind provider and its engine from the factory.
	Doctor doctor.Options
	// Output is text (the table), json or yaml (the probes as a list, for
	// scripts and CI).
	Output string
}

// NewCommand returns the doctor command.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this machine for the course: Go, container engine, cluster, kubeconfig, disk, ports",
		Long: `Check what the course and labctl need, one row each, with the fix for
anything missing. Exit code 0 when nothing fails (warnings are fine: without a
container engine, labctl uses the local provider).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if prov, ok := f.Providers.ByName[kind.ProviderName]; ok {
				o.Doctor.Kind = prov
				if kp, ok := prov.(*kind.Provider); ok && o.Doctor.Engine == "" {
					o.Doctor.Engine = kp.Engine
				}
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Doctor.Name, "name", cluster.DefaultName, "cluster name to look for")
	cmdutil.AddOutputFlag(cmd, &o.Output)
	return cmd
}

// Run does the work of `labctl doctor`.
func Run(ctx context.Context, o *Options) error {
	if o.Output == "" {
		o.Output = cmdutil.OutputText
	}
	if err := cmdutil.CheckOutput(o.Output); err != nil {
		return err
	}
	probes := doctor.Run(ctx, &o.Doctor)
	if o.Output == cmdutil.OutputText {
		doctor.Print(o.f.IOStreams, probes)
	} else if err := cmdutil.PrintStructured(o.f.IOStreams.Out, o.Output, probes); err != nil {
		return err
	}
	if doctor.Failed(probes) {
		return &cmdutil.SilentError{Code: userr.ExitEnvironment}
	}
	return nil
}
