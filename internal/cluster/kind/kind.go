// Package kind is the provider for machines with Docker or Podman: a kind
// cluster (sigs.k8s.io/kind's library) named like the course's, with a
// pinned node image, the course's ingress port mapping and the API audit
// log enabled. Engine commands go through internal/engine's Runner and
// kind's library through the API interface, so tests fake both.
package kind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/kubeconfig"
	"github.com/labctl/labctl/internal/userr"
)

// ProviderName is the --provider value.
const ProviderName = "kind"

// clusterLabel is the label kind puts on every node container.
const clusterLabel = "io.x-k8s.kind.cluster"

// ContextName is the kubeconfig context kind gives a cluster.
func ContextName(name string) string { return "kind-" + name }

// ControlPlaneNode is the container name of the cluster's control plane.
func ControlPlaneNode(name string) string { return name + "-control-plane" }

// Provider creates kind clusters with Docker or Podman.
type Provider struct {
	// Engine is --engine ("" = KIND_EXPERIMENTAL_PROVIDER, else detect).
	Engine string
	// Runner runs engine commands (default engine.OSRunner).
	Runner engine.Runner
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
	// NewAPI returns kind's library for an engine (default NewAPI).
	NewAPI func(e *engine.Engine, p Progress) API
	// StateRoot holds one directory per cluster (audit policy, kubeconfig);
	// default $XDG_STATE_HOME/labctl/kind.
	StateRoot string
	// NodeImage overrides the pinned node image.
	NodeImage string
	// WaitReady bounds the wait for the control plane (default 5 minutes).
	WaitReady time.Duration
	// PortInUse reports whether a host TCP port is taken on the address
	// kind publishes on (default PortInUse).
	PortInUse func(port int) bool
	// UnprivilegedPortStart is the lowest port a rootless engine may
	// publish (default: net.ipv4.ip_unprivileged_port_start, 1024 when
	// unreadable).
	UnprivilegedPortStart func() int
	// VisibleRoot holds the files an engine confined by snap must see
	// (the audit policy): snap's Docker cannot read hidden directories of
	// $HOME such as ~/.local/state. Default ~/labctl/kind.
	VisibleRoot string
	// Operators is how operators run on this provider's clusters
	// (labctl wires it up; nil = labctl cannot run one there).
	Operators cluster.OperatorRunner
	// Confirm asks the user a yes/no question (default: the streams'
	// Confirm when they can prompt, else never ask and say what to do).
	// Up asks before recreating a Podman cluster after a reboot.
	Confirm func(question string) bool

	mu  sync.Mutex
	eng *engine.Engine
}

var _ cluster.Provider = (*Provider)(nil)

// Name implements cluster.Provider.
func (p *Provider) Name() string { return ProviderName }

// DefaultStateRoot is $XDG_STATE_HOME/labctl/kind.
func DefaultStateRoot() string { return cluster.StateDir("kind") }

// Dir is the state directory of the named cluster.
func (p *Provider) Dir(name string) string {
	root := p.StateRoot
	if root == "" {
		root = DefaultStateRoot()
	}
	return filepath.Join(root, name)
}

// state is what labctl remembers about a kind cluster it created.
type state struct {
	Engine string `json:"engine"`
	// UserKubeconfig is the kubeconfig the context was merged into.
	UserKubeconfig string `json:"userKubeconfig,omitempty"`
	// Creating is set while kind creates the cluster: still set on the
	// next `up`, the creation was interrupted (Ctrl-C) and the cluster
	// is half-made.
	Creating bool `json:"creating,omitempty"`
	// MountDir holds what the node mounts from the host (the audit
	// policy) when that is not the state directory (snap's Docker).
	MountDir string `json:"mountDir,omitempty"`
	// HTTPPort and HTTPSPort are the host ports of the ingress mapping
	// (0: none).
	HTTPPort  int `json:"httpPort,omitempty"`
	HTTPSPort int `json:"httpsPort,omitempty"`
}

func (p *Provider) loadState(name string) *state {
	raw, err := os.ReadFile(filepath.Join(p.Dir(name), "state.json"))
	if err != nil {
		return nil
	}
	st := &state{}
	if json.Unmarshal(raw, st) != nil {
		return nil
	}
	return st
}

func (p *Provider) saveState(name string, st *state) error {
	raw, _ := json.MarshalIndent(st, "", "  ")
	return os.WriteFile(filepath.Join(p.Dir(name), "state.json"), raw, 0o644)
}

// Up implements cluster.Provider.
func (p *Provider) Up(ctx context.Context, opts cluster.UpOptions) (*cluster.Cluster, error) {
	if err := cluster.ValidateName(opts.Name); err != nil {
		return nil, userr.Usage(err.Error(), "for example: labctl up --provider kind --name lab1")
	}
	s := opts.Streams
	if s == nil {
		s, _, _ = iostreams.Test(false)
	}
	e, err := p.engineFor(ctx, opts.Name)
	if err != nil {
		return nil, err
	}
	userKC := opts.KubeconfigPath
	if userKC == "" {
		userKC = kubeconfig.DefaultPath()
	}
	if !opts.SkipKubeconfigMerge {
		// Fail before a minute of cluster creation, not after it.
		if err := kubeconfig.CheckWritable(userKC); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(p.Dir(opts.Name), 0o755); err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot create %s: %v", p.Dir(opts.Name), err), "set XDG_STATE_HOME to a writable directory")
	}

	step := s.StartStep(fmt.Sprintf("Creating kind cluster %q with %s", opts.Name, e.Name))
	api := p.api(e, s, step)
	existing, err := api.List()
	if err != nil {
		step.Fail()
		return nil, engineError(e, "cannot list kind clusters", err)
	}
	reused := slices.Contains(existing, opts.Name)
	if reused {
		recreate := false
		if st := p.loadState(opts.Name); st != nil && st.Creating {
			fmt.Fprintf(s.ErrOut, "%s kind cluster %q is half-made (an earlier `labctl up` was interrupted while creating it): deleting it and creating it again\n",
				s.Styles().Warning.Render("!"), opts.Name)
			recreate = true
		} else if err := p.ensureRunning(ctx, e, api, opts.Name, step); errors.Is(err, errPodmanStopped) {
			confirm := p.Confirm
			if confirm == nil && s.CanPrompt() {
				confirm = s.Confirm
			}
			step.Fail() // the spinner must not run over the question
			if confirm == nil || !confirm(fmt.Sprintf("kind cluster %q is stopped, and kind cannot restart Podman nodes. Delete it and create it again (the lab's objects in it are lost)?", opts.Name)) {
				return nil, err
			}
			recreate = true
			step = s.StartStep(fmt.Sprintf("Recreating kind cluster %q with %s", opts.Name, e.Name))
		} else if err != nil {
			step.Fail()
			return nil, err
		}
		if recreate {
			step.Update("deleting the old cluster")
			if err := api.Delete(opts.Name, p.kubeconfigFile(opts.Name)); err != nil {
				step.Fail()
				return nil, engineError(e, "kind could not delete cluster "+opts.Name, err)
			}
			reused = false
		}
	}
	if reused {
		step.Skip("already exists")
	} else {
		if err := p.create(ctx, e, api, s, step, opts.Name, opts.NodeImage); err != nil {
			step.Fail()
			return nil, err
		}
		step.Done()
	}

	c, err := p.clusterFor(ctx, e, api, opts.Name)
	if err != nil {
		return nil, err
	}
	c.Reused = reused
	if !reused {
		wait := s.StartStep("Waiting for the default ServiceAccount")
		if _, err := kube.WaitFor(ctx, c.Config, corev1.SchemeGroupVersion.WithResource("serviceaccounts"), "default", "default", 2*time.Minute, kube.Exists); err != nil {
			wait.Fail()
			return nil, userr.Wrap(err, userr.ExitFailure, "the kind cluster's controllers did not create the default ServiceAccount: "+err.Error(),
				fmt.Sprintf("check `%s logs %s`, then `labctl down --provider kind --name %s` and try again", e.Name, ControlPlaneNode(opts.Name), opts.Name))
		}
		wait.Done()
	}
	st := &state{Engine: e.Name}
	if old := p.loadState(opts.Name); old != nil {
		st.MountDir, st.HTTPPort, st.HTTPSPort = old.MountDir, old.HTTPPort, old.HTTPSPort
	}
	if !opts.SkipKubeconfigMerge {
		if err := kubeconfig.MergeFile(userKC, p.kubeconfigFile(opts.Name), ContextName(opts.Name)); err != nil {
			return c, err
		}
		st.UserKubeconfig = userKC
	} else if old := p.loadState(opts.Name); old != nil {
		st.UserKubeconfig = old.UserKubeconfig
	}
	if err := p.saveState(opts.Name, st); err != nil {
		return c, userr.Wrap(err, userr.ExitFailure, "cannot save the cluster's state: "+err.Error(), "check the disk and XDG_STATE_HOME")
	}
	return c, nil
}

// Get implements cluster.Provider.
func (p *Provider) Get(ctx context.Context, name string) (*cluster.Cluster, error) {
	e, api, ns, err := p.listNodes(ctx, name)
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		ct, err := e.InspectContainer(ctx, n.String())
		if err != nil {
			return nil, engineError(e, "cannot inspect node "+n.String(), err)
		}
		if !ct.Running {
			return nil, userr.New(fmt.Sprintf("kind cluster %q is stopped (node %s is not running)", name, n.String()),
				fmt.Sprintf("run `labctl up --provider kind --name %s` to start it again", name))
		}
	}
	return p.clusterFor(ctx, e, api, name)
}

// find returns the engine and kind's API when the cluster exists; the
// error wraps cluster.ErrNotFound when it does not (or no engine runs, so
// no kind cluster can be reached).
func (p *Provider) find(ctx context.Context, name string) (*engine.Engine, API, error) {
	e, err := p.engineFor(ctx, name)
	if err != nil {
		return nil, nil, userr.Wrap(fmt.Errorf("kind cluster %q: %w: %w", name, cluster.ErrNotFound, err), userr.Code(err),
			fmt.Sprintf("no kind cluster %q can be reached: %s", name, userr.Message(err)), "start the container engine, or use `--provider local`")
	}
	api := p.api(e, nil, nil)
	names, err := api.List()
	if err != nil {
		return nil, nil, engineError(e, "cannot list kind clusters", err)
	}
	if !slices.Contains(names, name) {
		return nil, nil, userr.Wrap(fmt.Errorf("kind cluster %q: %w", name, cluster.ErrNotFound), userr.ExitFailure,
			fmt.Sprintf("there is no kind cluster named %q", name), "run `labctl up --provider kind` to create it")
	}
	return e, api, nil
}

// Down implements cluster.Provider.
func (p *Provider) Down(ctx context.Context, name string) error {
	if err := cluster.ValidateName(name); err != nil {
		return userr.Usage(err.Error(), "pass the name given to `labctl up --name`")
	}
	e, api, err := p.find(ctx, name)
	if err != nil {
		return err
	}
	st := p.loadState(name)
	if err := api.Delete(name, p.kubeconfigFile(name)); err != nil {
		return engineError(e, "kind could not delete cluster "+name, err)
	}
	if st != nil && st.UserKubeconfig != "" {
		if err := kubeconfig.Remove(st.UserKubeconfig, ContextName(name)); err != nil {
			return err
		}
	}
	if st != nil && st.MountDir != "" {
		if err := os.RemoveAll(st.MountDir); err != nil {
			return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("deleted the cluster but cannot remove %s: %v", st.MountDir, err), "remove it by hand")
		}
	}
	if err := os.RemoveAll(p.Dir(name)); err != nil {
		return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("deleted the cluster but cannot remove %s: %v", p.Dir(name), err), "remove it by hand")
	}
	return nil
}

// List implements cluster.Lister: the kind clusters of the engine in use
// (none when no engine runs; an engine asked for by name that does not
// work is an error).
func (p *Provider) List(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, engine.InfoTimeout*2)
	defer cancel()
	e, err := p.ResolveEngine(ctx)
	if errors.Is(err, engine.ErrNoEngine) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names, err := p.api(e, nil, nil).List()
	if err != nil {
		return nil, engineError(e, "cannot list kind clusters", err)
	}
	return names, nil
}

func oneLine(err error) string { return userr.Message(err) }
