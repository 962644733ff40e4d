// Package root assembles the labctl command tree.
package root

import (
	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cli/version"
)

// NewCommand builds the whole command tree.
func NewCommand(f *cmdutil.Factory) *cobra.Command {
	var noColor bool
	cmd := &cobra.Command{
		Use:   "labctl",
		Short: "Run, check and grade the labs of the Building Kubernetes Operators course",
		Long: `labctl provisions a cluster for the course (kind with Docker or Podman, or a
local control plane where no container engine runs), deploys your operator,
checks each task of a lab against the live cluster, and grades submissions.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			if noColor {
				f.IOStreams.SetColor(false)
			}
		},
	}
	// --version as kind and kubectl users expect; -v stays --verbose.
	cmd.Version = f.Version
	cmd.SetVersionTemplate(version.Of(f.Version).Line() + "\n")
	cmd.PersistentFlags().BoolVarP(&f.IOStreams.Verbose, "verbose", "v", false, "show detail: each step as it starts, commands run, log tails")
	cmd.PersistentFlags().BoolVar(&noColor, "no-color", false, "disable colour (also NO_COLOR=1)")

	cmd.AddCommand(
		version.NewCommand(f),
	)
	for _, extra := range extraCommands {
		cmd.AddCommand(extra(f))
	}
	// The completion script is written where every command writes.
	cmd.SetOut(f.IOStreams.Out)
	usageErrors(cmd)
	return cmd
}

// extraCommands lists the commands wired in register.go; kept separate so
// each command package registers in one line.
var extraCommands []func(*cmdutil.Factory) *cobra.Command
