// Package controlplane implements `labctl controlplane build`: build (or
// find) the local provider's binaries ahead of time, e.g. in CI.
package controlplane

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	cp "github.com/labctl/labctl/internal/controlplane"
)

// Options are the flags of `labctl controlplane build`.
type Options struct {
	f        *cmdutil.Factory
	BinDir   string
	PrintDir bool
}

// NewCommand returns the controlplane command group.
func NewCommand(f *cmdutil.Factory) *cobra.Command {
	group := &cobra.Command{
		Use:   "controlplane",
		Short: "Manage the local provider's control-plane binaries",
	}
	o := &Options{f: f}
	build := &cobra.Command{
		Use:   "build",
		Short: "Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from the Go module proxy",
		Long: `Build the control-plane binaries the local provider runs, as one multi-call
binary in $XDG_CACHE_HOME/labctl/controlplane/<versions>/bin. Built once per
version; later calls return at once. A cold build takes 12-20 minutes on 2
cores and about 6 GB of Go cache.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return Run(cmd.Context(), o) },
	}
	build.Flags().StringVar(&o.BinDir, "bin-dir", "", "use prebuilt binaries from this directory instead")
	build.Flags().BoolVar(&o.PrintDir, "print-dir", false, "print only the binaries' directory on stdout")
	group.AddCommand(build)
	return group
}

// Run builds or finds the binaries.
func Run(ctx context.Context, o *Options) error {
	s := o.f.IOStreams
	step := s.StartStep("Control-plane binaries")
	opts := cp.Options{BinDir: o.BinDir, Progress: step.Update}
	if s.Verbose {
		opts.Log = s.ErrOut
	}
	bins, err := cp.Ensure(ctx, opts)
	if err != nil {
		step.Fail()
		return err
	}
	step.Done(bins.Source)
	var out io.Writer = s.Out
	if o.PrintDir {
		_, err = fmt.Fprintln(out, bins.Dir)
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", bins.Dir)
	return err
}
