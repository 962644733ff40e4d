package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// named is a provider that only has a name.
type named struct {
	Provider
	name string
}

func (n named) Name() string { return n.name }

func TestResolveAuto(t *testing.T) {
	kind, local := named{name: "kind"}, named{name: "local"}
	ctx := context.Background()

	p := &Providers{ByName: map[string]Provider{"kind": kind, "local": local}, Fallback: "local"}
	got, reason, err := p.Resolve(ctx, ProviderAuto)
	require.NoError(t, err)
	assert.Equal(t, local, got, "nothing detects: the fallback")
	assert.Equal(t, "using the local provider", reason)
	assert.Nil(t, p.FallbackFor(local), "the fallback has no fallback")
	assert.Equal(t, local, p.FallbackFor(kind))

	p.Detect = func(context.Context) (string, string) { return "kind", "docker is running" }
	got, reason, err = p.Resolve(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, kind, got)
	assert.Equal(t, "docker is running", reason)

	only := &Providers{ByName: map[string]Provider{"local": local}}
	got, _, err = only.Resolve(ctx, ProviderAuto)
	require.NoError(t, err)
	assert.Equal(t, local, got, "one provider and no fallback named: that one")

	_, _, err = p.Resolve(ctx, "docker")
	assert.EqualError(t, err, `unknown provider "docker": use one of: auto, kind, local`)
}
