// Whether a kind cluster runs and works: restarting stopped nodes, waiting until the control plane and its controllers are back, status.

package kind

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/userr"
)

// errPodmanStopped is under ensureRunning's error for a stopped Podman
// cluster, which only recreating brings back.
var errPodmanStopped = errors.New("kind cannot restart Podman nodes")

// ensureRunning starts the node containers of an existing cluster that
// stopped (e.g. after a reboot) and waits until it works again: API ready,
// every node Ready with a fresh heartbeat, and kube-system's controller
// manager and scheduler holding their leases. Podman nodes cannot be
// restarted (their addresses change), so there it says how to recreate
// the cluster (an error wrapping errPodmanStopped; Up offers to do it).
func (p *Provider) ensureRunning(ctx context.Context, e *engine.Engine, api API, name string, step *iostreams.Step) error {
	ns, err := api.ListNodes(name)
	if err != nil {
		return engineError(e, "cannot list the nodes of kind cluster "+name, err)
	}
	var stopped []string
	for _, n := range ns {
		ct, err := e.InspectContainer(ctx, n.String())
		if err != nil {
			return engineError(e, "cannot inspect node "+n.String(), err)
		}
		if ct.Exists && !ct.Running {
			stopped = append(stopped, n.String())
		}
	}
	if len(stopped) == 0 {
		return nil
	}
	if e.Name == engine.Podman {
		return userr.Wrap(errPodmanStopped, userr.ExitFailure, fmt.Sprintf("kind cluster %q is stopped (after a reboot?), and kind cannot restart Podman nodes: their addresses change", name),
			fmt.Sprintf("recreate it: `labctl down --provider kind --name %s`, then `labctl up` (the lab's objects in the cluster are lost, your project is not)", name))
	}
	step.Update("starting stopped nodes")
	// The API server's clock is the host's: heartbeats and leases renewed
	// after this moment come from the restarted cluster.
	since := time.Now().Add(-time.Second)
	if err := e.Start(ctx, stopped...); err != nil {
		return engineError(e, "cannot start the stopped nodes of kind cluster "+name, err)
	}
	raw, err := api.KubeConfig(name)
	if err != nil {
		return engineError(e, "cannot read the kubeconfig of kind cluster "+name, err)
	}
	cfg, err := restConfigFrom([]byte(raw))
	if err != nil {
		return err
	}
	internal, err := nodeutils.InternalNodes(ns)
	if err != nil {
		return engineError(e, "cannot read the roles of kind cluster "+name+"'s nodes", err)
	}
	var names []string
	for _, n := range internal {
		names = append(names, n.String())
	}
	if err := waitHealthy(ctx, cfg, names, since, step, 3*time.Minute); err != nil {
		return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("kind cluster %q started again but is not healthy: %s", name, oneLine(err)),
			fmt.Sprintf("check `%s logs %s`; `labctl reset --cluster` recreates it", e.Name, ControlPlaneNode(name)))
	}
	return nil
}

var (
	leases = coordinationv1.SchemeGroupVersion.WithResource("leases")
	nodesR = corev1.SchemeGroupVersion.WithResource("nodes")
)

// waitHealthy waits until a restarted cluster works: /readyz passes, each
// node renewed its lease since `since` and is Ready, and the controller
// manager and scheduler renewed their leader leases since then (a
// restarted control plane can answer /readyz while its controllers are
// still down, and then nothing reconciles).
func waitHealthy(ctx context.Context, cfg *rest.Config, nodeNames []string, since time.Time, step *iostreams.Step, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	left := func() time.Duration { return max(time.Until(deadline), time.Second) }
	step.Update("waiting for the API server")
	if err := waitReadyz(ctx, cfg, left()); err != nil {
		return err
	}
	for _, n := range nodeNames {
		step.Update("waiting for node %s", n)
		if _, err := kube.WaitFor(ctx, cfg, leases, "kube-node-lease", n, left(), renewedSince(since)); err != nil {
			return fmt.Errorf("node %s's kubelet did not renew its lease: %w", n, err)
		}
		if _, err := kube.WaitFor(ctx, cfg, nodesR, "", n, left(), kube.StatusCondition("Ready", "True")); err != nil {
			return fmt.Errorf("node %s is not Ready: %w", n, err)
		}
	}
	for _, c := range []string{"kube-controller-manager", "kube-scheduler"} {
		step.Update("waiting for %s", c)
		if _, err := kube.WaitFor(ctx, cfg, leases, "kube-system", c, left(), renewedSince(since)); err != nil {
			return fmt.Errorf("%s did not take its lease again: %w", c, err)
		}
	}
	return nil
}

// renewedSince is a Condition on a Lease: renewed at or after t.
func renewedSince(t time.Time) kube.Condition {
	return func(obj *unstructured.Unstructured) (bool, error) {
		if obj == nil {
			return false, nil
		}
		raw, _, _ := unstructured.NestedString(obj.Object, "spec", "renewTime")
		renewed, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			return false, nil
		}
		return !renewed.Before(t), nil
	}
}

// Status implements cluster.Provider.
func (p *Provider) Status(ctx context.Context, name string) (*cluster.Health, error) {
	e, api, ns, err := p.listNodes(ctx, name)
	if err != nil {
		return nil, err
	}
	out := &cluster.Health{Name: name, Provider: ProviderName, Context: ContextName(name), Running: len(ns) > 0}
	for _, n := range ns {
		comp := cluster.Component{Name: n.String()}
		ct, err := e.InspectContainer(ctx, n.String())
		switch {
		case err != nil:
			comp.Detail = "cannot inspect: " + oneLine(err)
		case !ct.Exists:
			comp.Detail = "container missing"
		case !ct.Running:
			comp.Detail = "container stopped"
		default:
			comp.Healthy = true
			if role, err := n.Role(); err == nil {
				comp.Detail = role + ", " + e.Name
			}
		}
		out.Running = out.Running && comp.Healthy
		out.Components = append(out.Components, comp)
	}
	if out.Running {
		apiserver := cluster.Component{Name: "kube-apiserver", Healthy: true}
		if raw, err := api.KubeConfig(name); err == nil {
			if cfg, err := restConfigFrom([]byte(raw)); err == nil {
				apiserver.Address = cfg.Host
				if err := waitReadyz(ctx, cfg, 3*time.Second); err != nil {
					apiserver.Healthy, apiserver.Detail = false, "not ready: "+oneLine(err)
					out.Running = false
				}
			}
		}
		out.Components = append(out.Components, apiserver)
	}
	return out, nil
}

// waitReadyz waits until the API server answers /readyz. A restarting API
// server offers nothing to watch, so this asks on a ticker, bounded by
// timeout.
func waitReadyz(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := rest.CopyConfig(cfg)
	c.Timeout = 2 * time.Second
	rc, err := rest.UnversionedRESTClientFor(withCodec(c))
	if err != nil {
		return err
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		_, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("API server not ready after %s: %v", timeout, last)
		case <-tick.C:
		}
	}
}
