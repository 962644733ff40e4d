// Package controlplane implements `labctl controlplane build`: download,
// build (or find) the local provider's binaries ahead of time, e.g. in CI.
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
	f          *cmdutil.Factory
	BinDir     string
	PrintDir   bool
	FromSource bool
	Mirror     string
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
		Short: "Download (or build) etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok",
		Long: `Put the control-plane binaries the local provider runs in
$XDG_CACHE_HOME/labctl/controlplane/<versions>/bin, once per version; later
calls return at once.

Online, the official release binaries of the pinned versions are downloaded
(dl.k8s.io, etcd's and kwok's GitHub releases) and checked against their
sha256 (pinned in labctl, else published with the release): seconds. When
that is impossible, the line before the build says why, and they are built
from the Go module proxy as one multi-call binary: 12-20 minutes on 2 cores
and about 6 GB of Go cache. --from-source skips the download (offline
machines); --mirror or $LABCTL_CONTROLPLANE_MIRROR points the download at a
copy of the release sites laid out as host/path (http://, https:// or
file://), e.g. file:///media/usb/ holding dl.k8s.io/release/v1.37.2/...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return Run(cmd.Context(), o) },
	}
	build.Flags().StringVar(&o.BinDir, "bin-dir", "", "use prebuilt binaries from this directory instead")
	build.Flags().BoolVar(&o.PrintDir, "print-dir", false, "print only the binaries' directory on stdout")
	build.Flags().BoolVar(&o.FromSource, "from-source", false, "build from the Go module proxy; download nothing from the release sites")
	build.Flags().StringVar(&o.Mirror, "mirror", "", "root of a copy of the release sites (default $"+cp.MirrorEnv+", else the sites)")
	group.AddCommand(build)
	return group
}

// Run builds or finds the binaries.
func Run(ctx context.Context, o *Options) error {
	s := o.f.IOStreams
	step := s.StartStep("Control-plane binaries")
	opts := cp.Options{BinDir: o.BinDir, FromSource: o.FromSource, Mirror: o.Mirror, Progress: step.Update, Notice: step.Note}
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
