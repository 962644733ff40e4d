package kind

import (
	"fmt"
	"io"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindlog "sigs.k8s.io/kind/pkg/log"

	"github.com/labctl/labctl/internal/engine"
)

// API is the part of kind's library (sigs.k8s.io/kind/pkg/cluster) that
// labctl uses; tests replace it with a fake.
type API interface {
	// Create creates the cluster described by cfg, writing its kubeconfig
	// to kubeconfigPath, and waits up to wait for the control plane.
	Create(cfg *v1alpha4.Cluster, kubeconfigPath string, wait time.Duration) error
	// Delete removes the cluster's nodes and its context from kubeconfigPath.
	Delete(name, kubeconfigPath string) error
	// List returns the names of the clusters that have nodes.
	List() ([]string, error)
	// ListNodes returns the cluster's node containers.
	ListNodes(name string) ([]nodes.Node, error)
	// KubeConfig returns the cluster's admin kubeconfig (host address).
	KubeConfig(name string) (string, error)
}

// Progress receives kind's status lines ("Ensuring node image", ...).
type Progress struct {
	// Status gets short status lines; Warn gets warnings; Debug gets
	// the rest (shown with -v).
	Status func(string)
	Warn   io.Writer
	Debug  io.Writer
}

// NewAPI returns kind's library driving the given engine.
func NewAPI(e *engine.Engine, p Progress) API {
	logger := &logger{p: p}
	opt := kindcluster.ProviderWithDocker()
	if e.Name == engine.Podman {
		opt = kindcluster.ProviderWithPodman()
	}
	return &libAPI{p: kindcluster.NewProvider(kindcluster.ProviderWithLogger(logger), opt)}
}

type libAPI struct{ p *kindcluster.Provider }

func (a *libAPI) Create(cfg *v1alpha4.Cluster, kubeconfigPath string, wait time.Duration) error {
	return a.p.Create(cfg.Name,
		kindcluster.CreateWithV1Alpha4Config(cfg),
		kindcluster.CreateWithKubeconfigPath(kubeconfigPath),
		kindcluster.CreateWithWaitForReady(wait),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false),
	)
}

func (a *libAPI) Delete(name, kubeconfigPath string) error { return a.p.Delete(name, kubeconfigPath) }
func (a *libAPI) List() ([]string, error)                  { return a.p.List() }
func (a *libAPI) ListNodes(name string) ([]nodes.Node, error) {
	return a.p.ListNodes(name)
}
func (a *libAPI) KubeConfig(name string) (string, error) { return a.p.KubeConfig(name, false) }

// logger adapts kind's logger to labctl's progress line.
type logger struct{ p Progress }

var _ kindlog.Logger = (*logger)(nil)

func (l *logger) Warn(m string) {
	if l.p.Warn != nil {
		fmt.Fprintln(l.p.Warn, "kind: "+strings.TrimSpace(m))
	}
}
func (l *logger) Warnf(f string, a ...any) { l.Warn(fmt.Sprintf(f, a...)) }
func (l *logger) Error(m string)           { l.Warn(m) }
func (l *logger) Errorf(f string, a ...any) {
	l.Warn(fmt.Sprintf(f, a...))
}
func (l *logger) V(level kindlog.Level) kindlog.InfoLogger {
	return infoLogger{l: l, level: level}
}

type infoLogger struct {
	l     *logger
	level kindlog.Level
}

func (i infoLogger) Enabled() bool { return i.level == 0 || i.l.p.Debug != nil }
func (i infoLogger) Infof(f string, a ...any) {
	i.Info(fmt.Sprintf(f, a...))
}
func (i infoLogger) Info(m string) {
	if i.level > 0 {
		if i.l.p.Debug != nil {
			fmt.Fprintln(i.l.p.Debug, "kind: "+strings.TrimSpace(m))
		}
		return
	}
	if s := statusText(m); s != "" && i.l.p.Status != nil {
		i.l.p.Status(s)
	}
}

// statusText strips kind's bullets and emoji: " • Ensuring node image
// (kindest/node:...) 🖼  ..." becomes "Ensuring node image".
func statusText(m string) string {
	m = strings.TrimSpace(m)
	m = strings.TrimLeft(m, "•✓✗ ")
	if i := strings.Index(m, " ("); i > 0 {
		m = m[:i]
	}
	m = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m), "..."))
	var b strings.Builder
	for _, r := range m {
		if r < 0x2000 {
			b.WriteRune(r)
		}
	}
	return strings.TrimSpace(b.String())
}
