package cmdutil

import (
	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/labs"
)

// CompleteLabs completes a LAB argument (or flag) with the embedded labs' IDs.
func (f *Factory) CompleteLabs(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	all, err := f.Labs()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	return labs.IDs(all), cobra.ShellCompDirectiveNoFileComp
}

// CompleteLabArg completes the first positional argument with lab IDs and
// nothing after it.
func (f *Factory) CompleteLabArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return f.CompleteLabs(cmd, args, toComplete)
}

// CompleteTasks completes --task with the task IDs (and titles, which
// shells show beside them) of the lab named by the first argument.
func (f *Factory) CompleteTasks(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	all, err := f.Labs()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	lab, err := labs.FindLab(all, args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, t := range lab.Tasks {
		if t.Hidden {
			continue
		}
		out = append(out, t.ID+"\t"+t.Title.In("en"))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
