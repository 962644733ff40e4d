package grade

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/userr"
)

func TestFlags(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	var got *Options
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"lab-8.2", "a", "b", "--roster", "r.csv", "--jobs", "3", "--timeout", "90s", "--out", "o", "--reveal-hidden", "--lang", "ru"})
	require.NoError(t, cmd.Execute())
	require.Equal(t, "lab-8.2", got.Lab)
	require.Equal(t, []string{"a", "b"}, got.Submissions)
	require.Equal(t, "r.csv", got.Roster)
	require.Equal(t, 3, got.Jobs)
	require.Equal(t, 90*time.Second, got.Timeout)
	require.Equal(t, "o", got.Out)
	require.True(t, got.RevealHidden)
	require.Equal(t, "ru", got.Lang)

	cmd = NewCommand(&cmdutil.Factory{IOStreams: s}, func(context.Context, *Options) error { return nil })
	cmd.SetArgs([]string{})
	require.Error(t, cmd.Execute(), "LAB is required")
}

func TestRunRejectsBadInput(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s}
	err := Run(context.Background(), &Options{f: f, Lab: "lab-0.0", Timeout: time.Minute})
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	err = Run(context.Background(), &Options{f: f, Lab: "8.2", Timeout: time.Minute, Submissions: []string{"/no/such/dir"}})
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	err = Run(context.Background(), &Options{f: f, Lab: "8.2", Timeout: time.Minute, Roster: "/no/such/roster.csv"})
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	err = Run(context.Background(), &Options{f: f, Lab: "8.2", Timeout: time.Minute, Lang: "fr"})
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	err = Run(context.Background(), &Options{f: f, Lab: "8.2", Timeout: time.Minute, Jobs: 0, jobsSet: true})
	require.Equal(t, userr.ExitUsage, userr.Code(err), "--jobs 0 is not 'choose for me'")
}
