package root

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/labctl/labctl/internal/userr"
)

// usageErrors makes every mistake on the command line (an unknown command
// or flag, a bad flag value, a wrong number of arguments, flags that
// exclude each other) a one-line usage error with exit code 2 and a hint
// naming the help to read. Cobra returns them as plain errors, which would
// otherwise exit 1 like a failed command.
func usageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return userr.Wrap(err, userr.ExitUsage, flagErrorText(err), helpHint(c))
	})
	// A root command with Args set and a RunE is asked to validate its
	// arguments, which is where an unknown command is caught.
	root.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		next := "`labctl --help` lists the commands"
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			next = "did you mean `labctl " + s[0] + "`?"
		}
		return userr.Usage(fmt.Sprintf("unknown command %q", args[0]), next)
	}
	root.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	root.SuggestionsMinimumDistance = 2

	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			completionShells(c)
		}
	}
	walk(root, func(c *cobra.Command) {
		if c == root || !c.Runnable() {
			return
		}
		orig := c.Args
		c.Args = func(c *cobra.Command, args []string) error {
			if orig != nil {
				if err := orig(c, args); err != nil {
					var ue *userr.Error
					if errors.As(err, &ue) {
						return err
					}
					return userr.Wrap(err, userr.ExitUsage, argsErrorText(c, args, err), helpHint(c))
				}
			}
			// Cobra checks these after the arguments; checking them here
			// gives them the same exit code and hint.
			if err := c.ValidateRequiredFlags(); err != nil {
				return userr.Wrap(err, userr.ExitUsage, err.Error(), helpHint(c))
			}
			if err := c.ValidateFlagGroups(); err != nil {
				return userr.Wrap(err, userr.ExitUsage, exclusiveText(c, err), helpHint(c))
			}
			return nil
		}
	})
}

// completionShells makes `labctl completion` refuse a shell it cannot
// write a script for, instead of printing its help and exiting 0.
func completionShells(c *cobra.Command) {
	var shells []string
	for _, sub := range c.Commands() {
		shells = append(shells, sub.Name())
	}
	c.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return userr.Usage(fmt.Sprintf("labctl cannot write completion for the shell %q", args[0]), "use one of: "+strings.Join(shells, ", "))
		}
		return nil
	}
	c.RunE = func(*cobra.Command, []string) error {
		return userr.Usage("name the shell to write completion for", "for example `labctl completion bash` (one of: "+strings.Join(shells, ", ")+")")
	}
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

func helpHint(c *cobra.Command) string {
	return "see `" + c.CommandPath() + " --help`"
}

var parseCause = regexp.MustCompile(`: strconv\.Parse\w+: parsing "[^"]*": (invalid syntax|value out of range)$`)

// flagErrorText shortens pflag's messages: "invalid argument "abc" for
// "--jobs" flag: strconv.ParseInt: parsing "abc": invalid syntax" says
// what the user needs without the Go function's name.
func flagErrorText(err error) string {
	msg := err.Error()
	var inv *pflag.InvalidValueError
	if errors.As(err, &inv) && inv.GetFlag() != nil {
		want := inv.GetFlag().Value.Type()
		switch want {
		case "int", "int32", "int64", "uint":
			want = "a whole number"
		case "duration":
			want = "a duration such as 90s or 10m"
		case "bool":
			want = "true or false"
		}
		return fmt.Sprintf("invalid value %q for --%s: expected %s", inv.GetValue(), inv.GetFlag().Name, want)
	}
	return parseCause.ReplaceAllString(msg, "")
}

// argsErrorText rewords cobra's argument errors (NoArgs reports an extra
// argument as an "unknown command"; ExactArgs counts without naming).
func argsErrorText(c *cobra.Command, args []string, err error) string {
	path := c.CommandPath()
	if strings.HasPrefix(err.Error(), "unknown command ") && len(args) > 0 {
		if c.HasSubCommands() {
			return fmt.Sprintf("%s has no command %q", path, args[0])
		}
		return fmt.Sprintf("%s takes no arguments, got %q", path, args[0])
	}
	if want := strings.TrimSpace(strings.TrimPrefix(c.Use, c.Name())); want != "" {
		return fmt.Sprintf("%s takes %s, got %d argument(s)", path, want, len(args))
	}
	return path + ": " + err.Error()
}

// exclusiveText names the flags that were given together.
func exclusiveText(c *cobra.Command, err error) string {
	var set []string
	c.Flags().Visit(func(f *pflag.Flag) {
		if _, ok := f.Annotations["cobra_annotation_mutually_exclusive"]; ok {
			set = append(set, "--"+f.Name)
		}
	})
	if len(set) > 1 {
		slices.Sort(set)
		return strings.Join(set, " and ") + " cannot be used together"
	}
	return err.Error()
}
