// Package status implements `labctl status`.
package status

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/userr"
)

// Options are the flags of `labctl status`.
type Options struct {
	f        *cmdutil.Factory
	Provider string
	Name     string
	Output   string
}

// Entry is one cluster in `labctl status -o json|yaml`: its health, or why
// it could not be read.
type Entry struct {
	*cluster.Health `json:",omitempty"`
	Provider        string `json:"provider"`
	Name            string `json:"name"`
	Error           string `json:"error,omitempty"`
}

// NewCommand returns the status command.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the clusters labctl manages: components, ports, health, memory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Provider, "provider", cluster.ProviderAuto, "only this provider's clusters")
	cmd.Flags().StringVar(&o.Name, "name", "", "only this cluster (default: all)")
	cmdutil.AddOutputFlag(cmd, &o.Output)
	return cmd
}

// Run does the work of `labctl status`.
func Run(ctx context.Context, o *Options) error {
	s := o.f.IOStreams
	st := s.Styles()
	if o.Output == "" {
		o.Output = cmdutil.OutputText
	}
	if err := cmdutil.CheckOutput(o.Output); err != nil {
		return err
	}
	structured := o.Output != cmdutil.OutputText
	entries := []Entry{}
	shown := 0
	provs, err := o.f.Providers.Select(ctx, o.Provider)
	if err != nil {
		return err
	}
	for _, p := range provs {
		pn := p.Name()
		names := []string{o.Name}
		if o.Name == "" {
			lister, ok := p.(cluster.Lister)
			if !ok {
				continue
			}
			var err error
			if names, err = lister.List(ctx); err != nil {
				return err
			}
		}
		for _, name := range names {
			cs, err := p.Status(ctx, name)
			if errors.Is(err, cluster.ErrNotFound) {
				continue
			}
			if err != nil {
				if o.Name != "" {
					return err
				}
				// One broken cluster must not hide the others.
				shown++
				if structured {
					entries = append(entries, Entry{Provider: pn, Name: name, Error: userr.Message(err)})
					continue
				}
				fmt.Fprintf(s.Out, "%s cluster %s: %s — %s\n", pn, st.Bold.Render(name), st.Failure.Render("broken"), userr.Message(err))
				continue
			}
			shown++
			if structured {
				entries = append(entries, Entry{Health: cs, Provider: pn, Name: name})
				continue
			}
			state := st.Success.Render("running")
			if !cs.Running {
				state = st.Failure.Render("degraded") + " — run `labctl up --provider " + pn + " --name " + name + "` to restart it"
			}
			fmt.Fprintf(s.Out, "%s cluster %s (context %s): %s\n", pn, st.Bold.Render(name), cs.Context, state)
			t := s.NewTable("COMPONENT", "PID", "ADDRESS", "HEALTH", "MEMORY (PSS)", "RSS")
			var total, totalRSS uint64
			for _, c := range cs.Components {
				health := st.Success.Render("ok")
				if !c.Healthy {
					health = st.Failure.Render(c.Detail)
				} else if c.Detail != "" {
					health += " (" + c.Detail + ")"
				}
				total += c.PSSBytes
				totalRSS += c.RSSBytes
				t.Row(c.Name, pidString(c.PID), dash(c.Address), health, mib(c.PSSBytes), mib(c.RSSBytes))
			}
			if total > 0 {
				t.Row("total", "", "", "", mib(total), mib(totalRSS))
			}
			if err := t.Print(); err != nil {
				return err
			}
		}
	}
	if shown == 0 {
		if o.Name != "" {
			return userr.New(fmt.Sprintf("no cluster named %q", o.Name), fmt.Sprintf("run `labctl up --name %s` to create it", o.Name))
		}
		if !structured {
			fmt.Fprintln(s.Out, "No clusters. Run `labctl up` to create one.")
		}
	}
	if structured {
		return cmdutil.PrintStructured(s.Out, o.Output, entries)
	}
	return nil
}

func pidString(pid int) string {
	if pid == 0 {
		return "-"
	}
	return strconv.Itoa(pid)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func mib(b uint64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%d MiB", b>>20)
}
