// Package version implements `labctl version` (and the root's --version).
package version

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/controlplane"
)

// Info is what `labctl version -o json|yaml` prints.
type Info struct {
	Labctl     string `json:"labctl"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
	Kubernetes string `json:"kubernetes"`
	Etcd       string `json:"etcd"`
	Kwok       string `json:"kwok"`
}

// Of returns the versions of labctl built as version.
func Of(version string) Info {
	v := controlplane.DefaultVersions()
	return Info{
		Labctl: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Kubernetes: v.Kubernetes, Etcd: v.Etcd, Kwok: v.Kwok,
	}
}

// Line is labctl's own version in one line, as --version prints it.
func (i Info) Line() string {
	return fmt.Sprintf("labctl %s (%s, %s)", i.Labctl, i.Go, i.Platform)
}

// NewCommand returns the version command.
func NewCommand(f *cmdutil.Factory) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print labctl's version and the component versions it uses",
		Args:  cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return cmdutil.CheckOutput(output)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := f.IOStreams.Out
			info := Of(f.Version)
			if output != cmdutil.OutputText {
				return cmdutil.PrintStructured(out, output, info)
			}
			fmt.Fprintln(out, info.Line())
			fmt.Fprintf(out, "kubernetes %s, etcd %s, kwok %s (local provider)\n", info.Kubernetes, info.Etcd, info.Kwok)
			return nil
		},
	}
	cmdutil.AddOutputFlag(cmd, &output)
	return cmd
}
