// Which container engine (Docker or Podman) runs a cluster, and how its errors read.

package kind

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/userr"
)

// ResolveEngine returns the container engine this provider uses
// (detected once).
func (p *Provider) ResolveEngine(ctx context.Context) (*engine.Engine, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.eng != nil {
		return p.eng, nil
	}
	e, err := engine.Detect(ctx, p.Runner, engine.Options{Explicit: p.Engine, Getenv: p.Getenv})
	if err != nil {
		return nil, err
	}
	p.eng = e
	return e, nil
}

// engineFor is the engine of an existing cluster: the one it was created
// with (so a Podman cluster is found while Docker also runs), unless
// --engine or KIND_EXPERIMENTAL_PROVIDER say otherwise.
func (p *Provider) engineFor(ctx context.Context, name string) (*engine.Engine, error) {
	getenv := p.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if p.Engine == "" && getenv(engine.EnvProvider) == "" {
		if st := p.loadState(name); st != nil && st.Engine != "" {
			return engine.Detect(ctx, p.Runner, engine.Options{Explicit: st.Engine, Getenv: getenv})
		}
	}
	return p.ResolveEngine(ctx)
}

func (p *Provider) api(e *engine.Engine, s *iostreams.IOStreams, step *iostreams.Step) API {
	prog := Progress{}
	if s != nil {
		prog.Warn = s.ErrOut
		if s.Verbose {
			prog.Debug = s.ErrOut
		}
	}
	if step != nil {
		prog.Status = func(m string) { step.Update("%s", m) }
	}
	if p.NewAPI != nil {
		return p.NewAPI(e, prog)
	}
	return NewAPI(e, prog)
}

func engineError(e *engine.Engine, what string, err error) error {
	var ue *userr.Error
	if errors.As(err, &ue) {
		return err
	}
	return userr.Wrap(err, userr.ExitFailure, what+": "+oneLine(err),
		fmt.Sprintf("check that %s works (`%s info`), then try again", e.Name, e.Name))
}

// Detect is for `--provider auto`: this provider when a container engine
// works (or one is asked for with --engine / KIND_EXPERIMENTAL_PROVIDER,
// so that its failure is reported rather than silently replaced), else
// fallback, with the reason either way.
func (p *Provider) Detect(fallback string) func(ctx context.Context) (string, string) {
	return func(ctx context.Context) (string, string) {
		getenv := p.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		if p.Engine != "" {
			return ProviderName, "--engine " + p.Engine
		}
		if v := getenv(engine.EnvProvider); v != "" {
			return ProviderName, engine.EnvProvider + "=" + v
		}
		e, err := p.ResolveEngine(ctx)
		if err != nil {
			return fallback, "no container engine running"
		}
		return ProviderName, fmt.Sprintf("%s %s is running", e.Name, e.Version)
	}
}
