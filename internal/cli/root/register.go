package root

import (
	"github.com/spf13/cobra"

	buildcmd "github.com/labctl/labctl/internal/cli/build"
	"github.com/labctl/labctl/internal/cli/classroom"
	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cli/controlplane"
	"github.com/labctl/labctl/internal/cli/doctor"
	"github.com/labctl/labctl/internal/cli/down"
	"github.com/labctl/labctl/internal/cli/grade"
	labscmd "github.com/labctl/labctl/internal/cli/labs"
	"github.com/labctl/labctl/internal/cli/reset"
	"github.com/labctl/labctl/internal/cli/solution"
	"github.com/labctl/labctl/internal/cli/status"
	"github.com/labctl/labctl/internal/cli/up"
	"github.com/labctl/labctl/internal/cli/verify"
)

func init() {
	extraCommands = append(extraCommands,
		func(f *cmdutil.Factory) *cobra.Command { return up.NewCommand(f, nil) },
		func(f *cmdutil.Factory) *cobra.Command { return down.NewCommand(f, nil) },
		func(f *cmdutil.Factory) *cobra.Command { return status.NewCommand(f, nil) },
		controlplane.NewCommand,
		func(f *cmdutil.Factory) *cobra.Command { return buildcmd.NewCommand(f, nil) },
		func(f *cmdutil.Factory) *cobra.Command { return grade.NewCommand(f, nil) },
		func(f *cmdutil.Factory) *cobra.Command { return reset.NewCommand(f, nil) },
		func(f *cmdutil.Factory) *cobra.Command { return doctor.NewCommand(f, nil) },
		func(f *cmdutil.Factory) *cobra.Command { return verify.NewCommand(f, nil) },
		func(f *cmdutil.Factory) *cobra.Command { return labscmd.NewCommand(f, nil) },
		func(f *cmdutil.Factory) *cobra.Command { return solution.NewCommand(f, nil) },
		func(f *cmdutil.Factory) *cobra.Command { return classroom.NewCommand(f, nil) },
	)
}
