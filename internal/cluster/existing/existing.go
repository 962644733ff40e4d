// Package existing is the provider for a cluster the user already has: a
// context of their kubeconfig. labctl does not manage its lifecycle: Up
// only checks that it answers, Down refuses, and there is no audit log
// labctl can read (audit checks report "skipped").
package existing

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/userr"
)

// ProviderName is the --provider value.
const ProviderName = "existing"

// Provider uses a context of an existing kubeconfig.
type Provider struct {
	// Kubeconfig is the kubeconfig to read ("" = $KUBECONFIG, else
	// ~/.kube/config; UpOptions.KubeconfigPath, when set, wins for Up).
	Kubeconfig string
	// Context is the context to use (--context). When empty, a cluster
	// name that is a context of the kubeconfig selects that context, and
	// Up falls back to the current context.
	Context string
	// Timeout bounds the reachability check (default 10s).
	Timeout time.Duration
	// Operators is how operators run on this provider's clusters
	// (labctl wires it up; nil = labctl cannot run one there).
	Operators cluster.OperatorRunner
}

var _ cluster.Provider = (*Provider)(nil)

// UserOwned tells commands that the clusters are the user's (see
// cluster.UserOwned).
func (p *Provider) UserOwned() bool { return true }

// Name implements cluster.Provider.
func (p *Provider) Name() string { return ProviderName }

type resolved struct {
	path    string // kubeconfig file (first of the loading rules)
	context string
	cfg     *rest.Config
}

// resolve picks the context: --context, else name when it is a context,
// else (only when fallbackCurrent) the current context. The error wraps
// cluster.ErrNotFound when there is no such context.
func (p *Provider) resolve(kubeconfigPath, name string, fallbackCurrent bool) (*resolved, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfigPath == "" {
		kubeconfigPath = p.Kubeconfig
	}
	if kubeconfigPath != "" {
		kubeconfigPath = absPath(kubeconfigPath)
		rules.ExplicitPath = kubeconfigPath
	}
	raw, err := rules.Load()
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitUsage, "cannot read your kubeconfig: "+userr.Message(err), "fix the file, or pass --kubeconfig with another one")
	}
	ctxName := p.Context
	switch {
	case ctxName != "":
		if _, ok := raw.Contexts[ctxName]; !ok {
			return nil, userr.Wrap(fmt.Errorf("context %q: %w", ctxName, cluster.ErrNotFound), userr.ExitUsage,
				fmt.Sprintf("your kubeconfig has no context %q", ctxName), "`kubectl config get-contexts` lists them")
		}
	case raw.Contexts[name] != nil:
		ctxName = name
	case fallbackCurrent && raw.CurrentContext != "":
		ctxName = raw.CurrentContext
	case fallbackCurrent:
		return nil, userr.Wrap(fmt.Errorf("no current context: %w", cluster.ErrNotFound), userr.ExitUsage,
			"your kubeconfig has no current context", "pass --context NAME, or run `labctl up` to create a cluster")
	default:
		return nil, userr.Wrap(fmt.Errorf("no context %q in your kubeconfig: %w", name, cluster.ErrNotFound), userr.ExitUsage,
			fmt.Sprintf("your kubeconfig has no context %q", name), "pass --context with the context to use (`kubectl config get-contexts` lists them)")
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, ctxName, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitUsage, fmt.Sprintf("context %q is unusable: %s", ctxName, userr.Message(err)), "fix it with `kubectl config view`, or pass another --context")
	}
	path := kubeconfigPath
	if path == "" {
		path = rules.GetDefaultFilename()
	}
	return &resolved{path: path, context: ctxName, cfg: cfg}, nil
}

// Up implements cluster.Provider: it checks that the context's API server
// answers and returns it.
func (p *Provider) Up(ctx context.Context, opts cluster.UpOptions) (*cluster.Cluster, error) {
	r, err := p.resolve(opts.KubeconfigPath, opts.Name, true)
	if err != nil {
		return nil, err
	}
	s := opts.Streams
	if s == nil {
		s, _, _ = iostreams.Test(false)
	}
	step := s.StartStep(fmt.Sprintf("Checking context %q", r.context))
	version, err := p.reachable(ctx, r)
	if err != nil {
		step.Fail()
		return nil, err
	}
	step.Done("Kubernetes " + version)
	c := p.clusterFor(r)
	c.Reused = true
	return c, nil
}

func (p *Provider) reachable(ctx context.Context, r *resolved) (string, error) {
	timeout := p.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	v, err := kube.ServerVersion(ctx, r.cfg, timeout)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		return "", userr.Wrap(err, userr.ExitEnvironment,
			fmt.Sprintf("context %q (%s) does not answer: %s", r.context, r.cfg.Host, userr.Message(err)),
			"start that cluster, or pick another with --context (`kubectl config get-contexts` lists them)")
	}
	return v, nil
}

func (p *Provider) clusterFor(r *resolved) *cluster.Cluster {
	return &cluster.Cluster{
		Name:       r.context,
		Provider:   ProviderName,
		Context:    r.context,
		Kubeconfig: r.path,
		Config:     r.cfg,
		Operators:  p.Operators,
		// Real nodes run the pods; the audit log, if any, is out of reach.
		Env: cluster.Env{RealPods: true},
	}
}

// Get implements cluster.Provider: the cluster of --context, or of the
// context named name.
func (p *Provider) Get(ctx context.Context, name string) (*cluster.Cluster, error) {
	r, err := p.resolve("", name, false)
	if err != nil {
		return nil, err
	}
	if _, err := p.reachable(ctx, r); err != nil {
		return nil, err
	}
	return p.clusterFor(r), nil
}

// Down implements cluster.Provider: labctl never deletes a cluster it did
// not create.
func (p *Provider) Down(ctx context.Context, name string) error {
	if _, err := p.resolve("", name, false); err != nil {
		return err
	}
	return userr.Usage(fmt.Sprintf("labctl does not delete clusters it did not create (context %q is an existing cluster)", p.contextOr(name)),
		"delete it with the tool that created it; `labctl reset` removes only the lab's objects")
}

func (p *Provider) contextOr(name string) string {
	if p.Context != "" {
		return p.Context
	}
	return name
}

// Status implements cluster.Provider.
func (p *Provider) Status(ctx context.Context, name string) (*cluster.Health, error) {
	r, err := p.resolve("", name, false)
	if err != nil {
		return nil, err
	}
	out := &cluster.Health{Name: r.context, Provider: ProviderName, Context: r.context, Running: true}
	comp := cluster.Component{Name: "kube-apiserver", Address: r.cfg.Host, Healthy: true}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if v, err := p.reachable(sctx, r); err != nil {
		comp.Healthy, comp.Detail, out.Running = false, userr.Message(err), false
	} else {
		comp.Detail = v
	}
	out.Components = append(out.Components, comp)
	return out, nil
}

// absPath makes a --kubeconfig value absolute so Cluster.Kubeconfig works
// from any directory.
func absPath(p string) string {
	if p == "" {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
