// Package build implements `labctl build node-image`, kind's command of the
// same name for machines no registry answers: it builds the kind node
// image from Debian's packages and the Go module proxy (internal/nodeimage)
// and prints its name for `labctl up --provider kind --image`.
package build

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/nodeimage"
)

// Options are the flags of `labctl build node-image`.
type Options struct {
	f *cmdutil.Factory
	// Image names the result (default: content-addressed, see
	// nodeimage.Reference).
	Image string
	// Engine is --engine (docker or podman; default: detected).
	Engine string
	// BinDir holds prebuilt control-plane binaries (--bin-dir).
	BinDir string
	Force  bool
}

// NewCommand returns the build command group. runF replaces Run in tests.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	if runF == nil {
		runF = Run
	}
	group := &cobra.Command{
		Use:   "build",
		Short: "Build images labctl's kind clusters need where no registry answers",
	}
	o := &Options{f: f}
	node := &cobra.Command{
		Use:   "node-image",
		Short: "Build a kind node image from Debian's packages and the Go module proxy",
		Long: `Build the kind node image without pulling from any registry: a Debian root
file system (debootstrap), containerd and crictl, kubelet, kubeadm, kubectl and
kube-proxy at labctl's pinned Kubernetes version built from the Go module proxy,
and the control-plane images preloaded. Built once and cached by content: later
calls print the name at once. Use it with ` + "`labctl up --provider kind --image NAME`" + `.
Needs debootstrap, Go 1.26 and Docker (or Podman).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runF(cmd.Context(), o) },
	}
	node.Flags().StringVar(&o.Image, "image", "", "name of the resulting image (default: labctl/kind-node:<version>-<content digest>)")
	node.Flags().StringVar(&o.Engine, "engine", "", "container engine: docker or podman (default: the one that answers)")
	node.Flags().StringVar(&o.BinDir, "bin-dir", "", "prebuilt control-plane binaries to use (default: built or cached by labctl)")
	node.Flags().BoolVar(&o.Force, "force", false, "build again even when the image exists")
	group.AddCommand(node)
	return group
}

// Run builds (or finds) the node image and prints its name on stdout.
func Run(ctx context.Context, o *Options) error {
	s := o.f.IOStreams
	e, err := engine.Detect(ctx, nil, engine.Options{Explicit: o.Engine})
	if err != nil {
		return err
	}
	step := s.StartStep("Kind node image")
	opts := nodeimage.Options{Tag: o.Image, Engine: e, ControlPlane: o.BinDir, Force: o.Force, Progress: step.Update}
	if s.Verbose {
		opts.Log = s.ErrOut
	}
	res, err := nodeimage.Build(ctx, opts)
	if err != nil {
		step.Fail()
		return err
	}
	if res.Cached {
		step.Done("cached")
	} else {
		var total time.Duration
		for _, st := range res.Steps {
			total += st.Duration
		}
		step.Done("built in " + total.Round(time.Second).String())
	}
	_, err = fmt.Fprintln(s.Out, res.Ref)
	return err
}
