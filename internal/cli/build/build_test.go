package build

import (
	"context"
	"testing"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/iostreams"
)

func TestNodeImageFlags(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	var got *Options
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"node-image", "--image", "my/node:1", "--engine", "podman", "--bin-dir", "/cp", "--force"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Image != "my/node:1" || got.Engine != "podman" || got.BinDir != "/cp" || !got.Force {
		t.Fatalf("options = %+v", got)
	}
}

func TestNodeImageTakesNoArguments(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, func(context.Context, *Options) error { return nil })
	cmd.SetArgs([]string{"node-image", "extra"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err == nil {
		t.Fatal("an argument was accepted")
	}
}
