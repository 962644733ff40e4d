package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/userr"
)

// Output formats of the listing commands (labs, version), as kubectl and
// kind users expect them.
const (
	OutputText = "text"
	OutputJSON = "json"
	OutputYAML = "yaml"
)

var structuredFormats = []string{OutputText, OutputJSON, OutputYAML}

// AddOutputFlag adds -o/--output (text, json or yaml) with completion; it
// is persistent, so subcommands (`labs show`) share it.
func AddOutputFlag(cmd *cobra.Command, target *string) {
	cmd.PersistentFlags().StringVarP(target, "output", "o", OutputText, "output format: "+strings.Join(structuredFormats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return structuredFormats, cobra.ShellCompDirectiveNoFileComp
	})
}

// CheckOutput refuses a format AddOutputFlag does not offer (a usage error).
func CheckOutput(format string) error {
	if slices.Contains(structuredFormats, format) {
		return nil
	}
	return userr.Usage(fmt.Sprintf("unknown output format %q", format), "use one of "+strings.Join(structuredFormats, ", "))
}

// PrintStructured writes v as JSON (indented) or YAML; format is json or yaml.
func PrintStructured(w io.Writer, format string, v any) error {
	switch format {
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case OutputYAML:
		raw, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("writing YAML: %w", err)
		}
		_, err = w.Write(raw)
		return err
	}
	return CheckOutput(format)
}
