// Package root assembles the labctl command tree.
package root

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cli/version"
	"github.com/labctl/labctl/internal/userr"
)

// NewCommand builds the whole command tree.
func NewCommand(f *cmdutil.Factory) *cobra.Command {
	var noColor bool
	var kubeconfigPath string
	cmd := &cobra.Command{
		Use:   "labctl",
		Short: "Run, check and grade the labs of the Building Kubernetes Operators course",
		Long: `labctl provisions a cluster for the course (kind with Docker or Podman, or a
local control plane where no container engine runs), deploys your operator,
checks each task of a lab against the live cluster, and grades submissions.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if noColor {
				f.IOStreams.SetColor(false)
			}
			// --kubeconfig means what it means to kubectl: this one file,
			// for every command. client-go reads KUBECONFIG everywhere
			// labctl loads a kubeconfig, so it is set for this process.
			if kubeconfigPath != "" && cmd.Flags().Lookup("kubeconfig") == cmd.Root().PersistentFlags().Lookup("kubeconfig") {
				abs, err := filepath.Abs(kubeconfigPath)
				if err != nil {
					return userr.Usage(fmt.Sprintf("--kubeconfig %s: %v", kubeconfigPath, err), "give the path of a kubeconfig file")
				}
				return os.Setenv("KUBECONFIG", abs)
			}
			return nil
		},
	}
	// --version as kind and kubectl users expect; -v stays --verbose.
	cmd.Version = f.Version
	cmd.SetVersionTemplate(version.Of(f.Version).Line() + "\n")
	cmd.PersistentFlags().BoolVarP(&f.IOStreams.Verbose, "verbose", "v", false, "show detail: each step as it starts, commands run, log tails")
	cmd.PersistentFlags().BoolVar(&noColor, "no-color", false, "disable colour (also NO_COLOR=1)")
	cmd.PersistentFlags().StringVar(&kubeconfigPath, "kubeconfig", "", "path to the kubeconfig file, as kubectl's --kubeconfig (default $KUBECONFIG or ~/.kube/config)")

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
