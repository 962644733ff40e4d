package doctor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/engine/enginetest"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/userr"
)

func TestCommandFlags(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{}}
	var got *Options
	cmd := NewCommand(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--name", "lab1"})
	require.NoError(t, cmd.Execute())
	assert.Equal(t, "lab1", got.Doctor.Name)
	assert.Nil(t, got.Doctor.Kind, "no kind provider in this factory")
}

// A failed probe is exit code 4, with the report and no message of its own.
func TestFailureExitCode(t *testing.T) {
	s, out, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{ByName: map[string]cluster.Provider{}}}
	var got *Options
	cmd := NewCommand(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs(nil)
	require.NoError(t, cmd.Execute())
	got.Doctor.Runner = enginetest.NewRunner("go").OnOutput("go version", "go version go1.22.5 linux/amd64\n")
	got.Doctor.Getenv = func(string) string { return "" }
	got.Doctor.CacheDir = t.TempDir()
	got.Doctor.Kubeconfig = t.TempDir() + "/none"
	got.Doctor.FreeBytes = func(string) (uint64, error) { return 60 << 30, nil }
	got.Doctor.PortInUse = func(int) bool { return false }
	got.Doctor.Sandbox = func() sandbox.Support { return sandbox.Support{OK: true} }

	err := Run(context.Background(), got)
	require.Error(t, err)
	assert.Equal(t, userr.ExitEnvironment, userr.Code(err))
	assert.True(t, strings.Contains(out.String(), "Go\tfail\t1.22.5"), out.String())

	// -o json: the same probes as a list a script can read, the same exit code.
	out.Reset()
	got.Output = cmdutil.OutputJSON
	err = Run(context.Background(), got)
	assert.Equal(t, userr.ExitEnvironment, userr.Code(err))
	var probes []struct{ Name, Status, Detail, Fix string }
	require.NoError(t, json.Unmarshal(out.Bytes(), &probes), out.String())
	var goProbe *struct{ Name, Status, Detail, Fix string }
	for i := range probes {
		if probes[i].Name == "Go" {
			goProbe = &probes[i]
		}
	}
	require.NotNil(t, goProbe, out.String())
	assert.Equal(t, "fail", goProbe.Status)
	assert.Contains(t, goProbe.Detail, "1.22.5")
	assert.NotEmpty(t, goProbe.Fix)

	got.Output = "wide"
	assert.Equal(t, userr.ExitUsage, userr.Code(Run(context.Background(), got)))
}
