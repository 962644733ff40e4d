// The cluster's kubeconfig as kind writes it, and a client for it.

package kind

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/userr"
)

func (p *Provider) kubeconfigFile(name string) string {
	return filepath.Join(p.Dir(name), "kubeconfig")
}

func (p *Provider) clusterFor(ctx context.Context, e *engine.Engine, api API, name string) (*cluster.Cluster, error) {
	raw, err := api.KubeConfig(name)
	if err != nil {
		return nil, engineError(e, "cannot read the kubeconfig of kind cluster "+name, err)
	}
	kc := p.kubeconfigFile(name)
	if err := os.MkdirAll(filepath.Dir(kc), 0o755); err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, "cannot create "+filepath.Dir(kc), "set XDG_STATE_HOME to a writable directory")
	}
	if err := os.WriteFile(kc, []byte(raw), 0o600); err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, "cannot write "+kc+": "+err.Error(), "check the disk and XDG_STATE_HOME")
	}
	cfg, err := restConfigFrom([]byte(raw))
	if err != nil {
		return nil, err
	}
	node := ControlPlaneNode(name)
	return &cluster.Cluster{
		Name:       name,
		Provider:   ProviderName,
		Context:    ContextName(name),
		Kubeconfig: kc,
		Config:     cfg,
		Operators:  p.Operators,
		Env: cluster.Env{
			RealPods: true,
			StateDir: p.Dir(name),
			AuditLog: func(ctx context.Context) (io.ReadCloser, error) {
				return ReadNodeFile(ctx, e, node, AuditLogPath), nil
			},
		},
	}, nil
}

func restConfigFrom(raw []byte) (*rest.Config, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, "kind returned an unusable kubeconfig: "+err.Error(), "run `labctl down` and `labctl up` again")
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

func withCodec(c *rest.Config) *rest.Config {
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}
