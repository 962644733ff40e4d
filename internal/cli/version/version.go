// Package version implements `labctl version`.
package version

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/controlplane"
)

// NewCommand returns the version command.
func NewCommand(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print labctl's version and the component versions it uses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := f.IOStreams.Out
			fmt.Fprintf(out, "labctl %s (%s, %s/%s)\n", f.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			v := controlplane.DefaultVersions()
			fmt.Fprintf(out, "kubernetes %s, etcd %s, kwok %s (local provider)\n", v.Kubernetes, v.Etcd, v.Kwok)
			return nil
		},
	}
}
