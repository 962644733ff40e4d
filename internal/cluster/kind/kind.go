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
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/freeport"
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

func (p *Provider) kubeconfigFile(name string) string {
	return filepath.Join(p.Dir(name), "kubeconfig")
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

func (p *Provider) create(ctx context.Context, e *engine.Engine, api API, s *iostreams.IOStreams, step *iostreams.Step, name, nodeImage string) error {
	node := ControlPlaneNode(name)
	ct, err := e.InspectContainer(ctx, node)
	if err != nil {
		return engineError(e, "cannot inspect container "+node, err)
	}
	if ct.Exists && ct.Labels[clusterLabel] != name {
		return userr.New(fmt.Sprintf("the name %q is taken: a %s container %s exists that is not a node of kind cluster %q", name, e.Name, node, name),
			fmt.Sprintf("remove it (`%s rm -f %s`) or choose another name with --name", e.Name, node))
	}
	facts, err := e.Facts(ctx)
	if err != nil {
		return engineError(e, "cannot read what "+e.Name+" says about its host", err)
	}
	warn := s.Styles().Warning.Render("!")
	mountDir, err := p.mountDir(name, facts)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(mountDir, 0o755); err != nil {
		return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot create %s: %v", mountDir, err), "check its permissions")
	}
	policy := filepath.Join(mountDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(cluster.AuditPolicy), 0o644); err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot write the audit policy: "+err.Error(), "check the disk and XDG_STATE_HOME")
	}
	if facts.Snap {
		fmt.Fprintf(s.ErrOut, "%s Docker from snap cannot read hidden directories: the cluster's audit policy is in %s (removed by `labctl down`)\n", warn, mountDir)
	}
	if facts.CgroupV1() {
		fmt.Fprintf(s.ErrOut, "%s this host uses cgroup v1, which kubelet 1.35+ refuses by default: the cluster's kubelet is configured with failCgroupV1: false (cgroup v2 is the long-term fix)\n", warn)
	}
	httpPort, httpsPort := p.ingressPorts(e, facts, s)
	img := nodeImage
	if img == "" {
		img = p.NodeImage
	}
	if img == "" {
		img = NodeImage
	}
	wait := p.WaitReady
	if wait == 0 {
		wait = 5 * time.Minute
	}
	cfg := ClusterConfig(ConfigOptions{Name: name, NodeImage: img, PolicyHostPath: policy, HTTPPort: httpPort, HTTPSPort: httpsPort, CgroupV1: facts.CgroupV1()})
	st := &state{Engine: e.Name, Creating: true, HTTPPort: httpPort, HTTPSPort: httpsPort}
	if mountDir != p.Dir(name) {
		st.MountDir = mountDir
	}
	if err := p.saveState(name, st); err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot save the cluster's state: "+err.Error(), "check the disk and XDG_STATE_HOME")
	}
	kc := p.kubeconfigFile(name)
	done := make(chan error, 1)
	go func() { done <- api.Create(cfg, kc, wait) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// kind's library takes no context: let it finish in the
		// background is not an option (the process exits), so say what
		// may be left behind.
		return userr.Wrap(ctx.Err(), userr.ExitInterrupted, "interrupted while kind was creating the cluster",
			fmt.Sprintf("the next `labctl up` deletes the half-made cluster and creates it again (or `labctl down --provider kind --name %s` removes it)", name))
	}
	if err != nil {
		return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("kind could not create cluster %q: %s", name, oneLine(err)),
			fmt.Sprintf("run with -v for kind's output; `%s ps -a` shows its containers; then `labctl up` again", e.Name))
	}
	st.Creating = false
	if err := p.saveState(name, st); err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot save the cluster's state: "+err.Error(), "check the disk and XDG_STATE_HOME")
	}
	return nil
}

// mountDir is where the files the node mounts from the host live: the
// cluster's state directory, except for Docker from snap, which cannot
// see hidden directories such as ~/.local/state (kind's known issues).
func (p *Provider) mountDir(name string, f *engine.Facts) (string, error) {
	if !f.Snap {
		return p.Dir(name), nil
	}
	root := p.VisibleRoot
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", userr.Wrap(err, userr.ExitEnvironment, "Docker from snap needs the audit policy in a visible directory of $HOME, and $HOME is unknown", "set HOME")
		}
		root = filepath.Join(home, "labctl", "kind")
	}
	return filepath.Join(root, name), nil
}

// ingressPorts are the host ports for the node's 80 and 443: the course's
// 80 and 443, or 8080 and 8443 when a rootless engine may not publish
// privileged ports, or none when those are taken; the user is told which.
func (p *Provider) ingressPorts(e *engine.Engine, f *engine.Facts, s *iostreams.IOStreams) (int, int) {
	warn := s.Styles().Warning.Render("!")
	http, https := 80, 443
	if f.Rootless {
		if start := p.unprivilegedPortStart(); start > http {
			http, https = 8080, 8443
			fmt.Fprintf(s.ErrOut, "%s rootless %s cannot publish ports below %d (net.ipv4.ip_unprivileged_port_start): the cluster's ingress is on http://localhost:%d and https://localhost:%d instead of 80/443; `sudo sysctl net.ipv4.ip_unprivileged_port_start=80` and `labctl reset --cluster` give you 80/443\n",
				warn, e.Name, start, http, https)
		}
	}
	for _, port := range []int{http, https} {
		if p.portInUse(port) {
			fmt.Fprintf(s.ErrOut, "%s port %d is in use on this machine: creating the cluster without the course's ingress port mapping (%d/%d); free the port and run `labctl reset --cluster` to get it\n",
				warn, port, http, https)
			return 0, 0
		}
	}
	return http, https
}

func (p *Provider) unprivilegedPortStart() int {
	if p.UnprivilegedPortStart != nil {
		return p.UnprivilegedPortStart()
	}
	return UnprivilegedPortStart()
}

// UnprivilegedPortStart reads net.ipv4.ip_unprivileged_port_start (1024,
// the kernel's default, when it cannot be read).
func UnprivilegedPortStart() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if err != nil {
		return 1024
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 1024
	}
	return n
}

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

func (p *Provider) portInUse(port int) bool {
	if p.PortInUse != nil {
		return p.PortInUse(port)
	}
	return PortInUse(port)
}

// PortInUse reports whether the host TCP port is taken for kind, which
// publishes on ListenAddress (all addresses): a listener on any address
// blocks it, not only one on 127.0.0.1.
func PortInUse(port int) bool { return freeport.InUse(ListenAddress, port) }

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

// ReadNodeFile streams a file from a node container (`<engine> exec NODE
// cat PATH`); closing the reader stops the command.
func ReadNodeFile(ctx context.Context, e *engine.Engine, node, path string) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	go func() {
		err := e.Exec(ctx, node, pw, "cat", path)
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("cannot read %s from node %s: %w", path, node, err)
		}
		pw.CloseWithError(err)
	}()
	return &cancelReader{PipeReader: pr, cancel: cancel}
}

type cancelReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (r *cancelReader) Close() error {
	r.cancel()
	return r.PipeReader.Close()
}

func restConfigFrom(raw []byte) (*rest.Config, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, "kind returned an unusable kubeconfig: "+err.Error(), "run `labctl down` and `labctl up` again")
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// Get implements cluster.Provider.
func (p *Provider) Get(ctx context.Context, name string) (*cluster.Cluster, error) {
	e, api, err := p.find(ctx, name)
	if err != nil {
		return nil, err
	}
	ns, err := api.ListNodes(name)
	if err != nil {
		return nil, engineError(e, "cannot list the nodes of kind cluster "+name, err)
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

// Nodes returns the node containers of a running cluster (to load images).
func (p *Provider) Nodes(ctx context.Context, name string) (*engine.Engine, []nodes.Node, error) {
	e, api, err := p.find(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	ns, err := api.ListNodes(name)
	if err != nil {
		return nil, nil, engineError(e, "cannot list the nodes of kind cluster "+name, err)
	}
	// As kind's own `load` does: only the Kubernetes nodes, never an
	// external load balancer's container.
	internal, err := nodeutils.InternalNodes(ns)
	if err != nil {
		return nil, nil, engineError(e, "cannot read the roles of kind cluster "+name+"'s nodes", err)
	}
	return e, internal, nil
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

// Status implements cluster.Provider.
func (p *Provider) Status(ctx context.Context, name string) (*cluster.Health, error) {
	e, api, err := p.find(ctx, name)
	if err != nil {
		return nil, err
	}
	ns, err := api.ListNodes(name)
	if err != nil {
		return nil, engineError(e, "cannot list the nodes of kind cluster "+name, err)
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

func withCodec(c *rest.Config) *rest.Config {
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}

func engineError(e *engine.Engine, what string, err error) error {
	var ue *userr.Error
	if errors.As(err, &ue) {
		return err
	}
	return userr.Wrap(err, userr.ExitFailure, what+": "+oneLine(err),
		fmt.Sprintf("check that %s works (`%s info`), then try again", e.Name, e.Name))
}

func oneLine(err error) string { return userr.Message(err) }

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
