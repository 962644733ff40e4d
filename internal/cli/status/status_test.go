package status

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/iostreams"
)

// provider is a stand-in cluster provider with two clusters, one of them
// unreadable; unit tests may fake providers.
type provider struct{ cluster.Provider }

func (provider) Name() string                           { return "local" }
func (provider) List(context.Context) ([]string, error) { return []string{"good", "broken"}, nil }
func (provider) Status(_ context.Context, name string) (*cluster.Health, error) {
	if name == "broken" {
		return nil, errors.New("state is unreadable")
	}
	return &cluster.Health{Name: name, Provider: "local", Context: "labctl-" + name, Running: true,
		Components: []cluster.Component{{Name: "etcd", PID: 42, Address: "127.0.0.1:2379", Healthy: true, PSSBytes: 64 << 20}}}, nil
}

func TestStatusAsJSON(t *testing.T) {
	s, out, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{ByName: map[string]cluster.Provider{"local": provider{}}}}
	cmd := NewCommand(f, nil)
	cmd.SetArgs([]string{"-o", "json", "--provider", "local"})
	require.NoError(t, cmd.ExecuteContext(context.Background()))

	var entries []map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &entries), out.String())
	require.Len(t, entries, 2)
	assert.Equal(t, "good", entries[0]["name"])
	assert.Equal(t, "labctl-good", entries[0]["context"])
	assert.Equal(t, true, entries[0]["running"])
	assert.Len(t, entries[0]["components"], 1)
	assert.Equal(t, "broken", entries[1]["name"])
	assert.Equal(t, "state is unreadable", entries[1]["error"])
}
