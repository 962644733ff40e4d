package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/labctl/labctl/internal/userr"
)

// ProviderAuto picks the provider from the machine.
const ProviderAuto = "auto"

// Providers knows every cluster provider and how to choose one: the
// registry behind --provider.
type Providers struct {
	// ByName maps --provider values to providers.
	ByName map[string]Provider
	// Detect chooses a provider for --provider auto and says why (e.g.
	// "docker is running" or "no container engine: using local").
	Detect func(ctx context.Context) (name, reason string)
	// Fallback names the provider that needs nothing but Go (the local
	// control plane): auto's choice when nothing is detected, and what
	// `up` falls back to when the detected provider fails.
	Fallback string
}

// FallbackFor returns the provider to try when prov, chosen by auto,
// failed; nil when there is none other than prov.
func (p *Providers) FallbackFor(prov Provider) Provider {
	fb, ok := p.ByName[p.Fallback]
	if !ok || fb == prov {
		return nil
	}
	return fb
}

// Names lists the accepted --provider values.
func (p *Providers) Names() []string {
	names := []string{ProviderAuto}
	for n := range p.ByName {
		names = append(names, n)
	}
	slices.Sort(names[1:])
	return names
}

// Resolve returns the provider for a --provider value.
func (p *Providers) Resolve(ctx context.Context, name string) (Provider, string, error) {
	reason := ""
	if name == "" || name == ProviderAuto {
		if p.Detect == nil {
			name = p.Fallback
			if name == "" && len(p.ByName) == 1 {
				for only := range p.ByName { // the one there is
					name = only
				}
			}
			reason = "using the " + name + " provider"
		} else {
			name, reason = p.Detect(ctx)
		}
	}
	prov, ok := p.ByName[name]
	if !ok {
		return nil, "", userr.Usage(fmt.Sprintf("unknown provider %q", name),
			"use one of: "+strings.Join(p.Names(), ", "))
	}
	return prov, reason, nil
}

// Select returns the provider named by a --provider value, or every
// provider (sorted by name) for "auto": commands that act on an existing
// cluster look for it in each.
func (p *Providers) Select(ctx context.Context, name string) ([]Provider, error) {
	if name != "" && name != ProviderAuto {
		prov, _, err := p.Resolve(ctx, name)
		if err != nil {
			return nil, err
		}
		return []Provider{prov}, nil
	}
	var all []Provider
	for _, n := range p.Names()[1:] {
		all = append(all, p.ByName[n])
	}
	return all, nil
}

// Lister is implemented by providers that can enumerate their clusters.
type Lister interface {
	List(ctx context.Context) ([]string, error)
}

// FindCluster looks for a running cluster named name across providers,
// preferring the given provider when set.
func (p *Providers) FindCluster(ctx context.Context, provider, name string) (*Cluster, error) {
	if provider != "" && provider != ProviderAuto {
		prov, _, err := p.Resolve(ctx, provider)
		if err != nil {
			return nil, err
		}
		c, err := prov.Get(ctx, name)
		if errors.Is(err, ErrNotFound) {
			return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("there is no %s cluster named %q", provider, name),
				fmt.Sprintf("run `labctl up --provider %s --name %s` first", provider, name))
		}
		return c, err
	}
	var firstErr error
	for _, n := range p.Names()[1:] {
		c, err := p.ByName[n].Get(ctx, name)
		if err == nil {
			return c, nil
		}
		if firstErr == nil && !errors.Is(err, ErrNotFound) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, userr.New(fmt.Sprintf("no running cluster named %q", name), "run `labctl up` first (or pass --name)")
}
