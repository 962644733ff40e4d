package kind_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cli/up"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/engine/enginetest"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/testcluster"
	"github.com/labctl/labctl/internal/userr"
)

// A real local control plane stands in for the kind cluster's API server
// where the provider talks to the API (the default ServiceAccount wait,
// /readyz); it starts on first use and only outside -short.
var (
	apiOnce  sync.Once
	apiEnv   *testcluster.Cluster
	apiStop  func()
	apiErr   error
	mainOnce sync.Mutex
)

func TestMain(m *testing.M) {
	code := m.Run()
	mainOnce.Lock()
	if apiStop != nil {
		apiStop()
	}
	mainOnce.Unlock()
	os.Exit(code)
}

func apiServer(t *testing.T) *testcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a local control plane: not in -short")
	}
	apiOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		mainOnce.Lock()
		defer mainOnce.Unlock()
		apiEnv, apiStop, apiErr = testcluster.Start(ctx, "kindtest")
	})
	require.NoError(t, apiErr)
	return apiEnv
}

// kindKubeconfig rewrites the local cluster's admin kubeconfig the way
// kind names things (context, cluster and user kind-NAME).
func kindKubeconfig(t *testing.T, env *testcluster.Cluster, name string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	require.NoError(t, err)
	old := cfg.Contexts[cfg.CurrentContext]
	n := kind.ContextName(name)
	cfg.Clusters = map[string]*clientcmdapi.Cluster{n: cfg.Clusters[old.Cluster]}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{n: cfg.AuthInfos[old.AuthInfo]}
	cfg.Contexts = map[string]*clientcmdapi.Context{n: {Cluster: n, AuthInfo: n}}
	cfg.CurrentContext = n
	raw, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return string(raw)
}

// fakeAPI is kind's library for tests: clusters are lists of fake nodes.
type fakeAPI struct {
	mu         sync.Mutex
	clusters   map[string][]nodes.Node
	created    []*v1alpha4.Cluster
	deleted    []string
	createErr  error
	kubeconfig string
	calls      []string
	onCreate   func(name string)
	// block, when set, makes Create wait for it (an interrupted create);
	// entered is closed when Create starts waiting, returned when it
	// returns.
	block, entered, returned chan struct{}
}

func newFakeAPI() *fakeAPI { return &fakeAPI{clusters: map[string][]nodes.Node{}} }

func (f *fakeAPI) Create(cfg *v1alpha4.Cluster, kubeconfigPath string, wait time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "create "+cfg.Name)
	f.created = append(f.created, cfg)
	if f.block != nil {
		close(f.entered)
		f.mu.Unlock()
		<-f.block
		f.mu.Lock()
		defer close(f.returned)
	}
	if f.createErr != nil {
		return f.createErr
	}
	f.clusters[cfg.Name] = []nodes.Node{enginetest.NewNode(kind.ControlPlaneNode(cfg.Name))}
	if f.onCreate != nil {
		f.onCreate(cfg.Name)
	}
	return os.WriteFile(kubeconfigPath, []byte(f.kubeconfig), 0o600)
}

func (f *fakeAPI) Delete(name, kubeconfigPath string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "delete "+name+" "+kubeconfigPath)
	f.deleted = append(f.deleted, name)
	delete(f.clusters, name)
	return nil
}

func (f *fakeAPI) List() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.clusters {
		out = append(out, n)
	}
	return out, nil
}

func (f *fakeAPI) ListNodes(name string) ([]nodes.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clusters[name], nil
}

func (f *fakeAPI) KubeConfig(name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.clusters[name]; !ok {
		return "", fmt.Errorf("could not locate any control plane nodes for cluster named %q", name)
	}
	return f.kubeconfig, nil
}

// containers scripts `<engine> inspect --type container NAME` and
// `<engine> start`.
type containers struct {
	mu    sync.Mutex
	state map[string]*engine.Container
	// onStart runs after `<engine> start` (the cluster coming back).
	onStart func()
}

func (c *containers) attach(r *enginetest.Runner, name string) {
	r.On(name+" inspect --type container", func(cmd engine.Cmd) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := cmd.Args[len(cmd.Args)-1]
		ct, ok := c.state[n]
		if !ok {
			return enginetest.Fail(cmd, 1, "Error: No such container: "+n+"\n")
		}
		fmt.Fprintf(cmd.Stdout, "%v", ct.Running)
		for k, v := range ct.Labels {
			fmt.Fprintf(cmd.Stdout, "\n%s=%s", k, v)
		}
		fmt.Fprintln(cmd.Stdout)
		return nil
	})
	r.On(name+" start", func(cmd engine.Cmd) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range cmd.Args[1:] {
			c.state[n].Running = true
		}
		if c.onStart != nil {
			c.onStart()
		}
		return nil
	})
}

type fixture struct {
	p      *kind.Provider
	api    *fakeAPI
	r      *enginetest.Runner
	cts    *containers
	userKC string
	s      *iostreams.IOStreams
	errOut *bytes.Buffer
}

func newFixture(t *testing.T, engineName string) *fixture {
	t.Helper()
	f := &fixture{api: newFakeAPI(), r: enginetest.NewRunner(), cts: &containers{state: map[string]*engine.Container{}}}
	f.r.Running(engineName, "27.1.0").Info(engineName, engine.Facts{CgroupVersion: "2", Arch: "amd64"})
	f.cts.attach(f.r, engineName)
	f.p = &kind.Provider{
		Runner:    f.r,
		Getenv:    func(string) string { return "" },
		NewAPI:    func(*engine.Engine, kind.Progress) kind.API { return f.api },
		StateRoot: t.TempDir(),
		PortInUse: func(int) bool { return false },
	}
	f.api.onCreate = func(name string) {
		f.cts.mu.Lock()
		defer f.cts.mu.Unlock()
		f.cts.state[kind.ControlPlaneNode(name)] = &engine.Container{Exists: true, Running: true, Labels: map[string]string{"io.x-k8s.kind.cluster": name}}
	}
	f.userKC = filepath.Join(t.TempDir(), "config")
	f.s, _, f.errOut = iostreams.Test(false)
	return f
}

// exists puts a running kind cluster into the fake.
func (f *fixture) exists(name string, running bool) *enginetest.Node {
	n := enginetest.NewNode(kind.ControlPlaneNode(name))
	f.api.clusters[name] = []nodes.Node{n}
	f.cts.state[n.Name] = &engine.Container{Exists: true, Running: running, Labels: map[string]string{"io.x-k8s.kind.cluster": name}}
	return n
}

func (f *fixture) up(name string) (*cluster.Cluster, error) {
	return f.p.Up(context.Background(), cluster.UpOptions{Name: name, Streams: f.s, KubeconfigPath: f.userKC})
}

func TestUpCreatesTheCourseCluster(t *testing.T) {
	env := apiServer(t)
	f := newFixture(t, "docker")
	f.api.kubeconfig = kindKubeconfig(t, env, cluster.DefaultName)
	c, err := f.up(cluster.DefaultName)
	require.NoError(t, err, f.errOut.String())

	require.Len(t, f.api.created, 1)
	cfg := f.api.created[0]
	assert.Equal(t, "k8s-operators-course", cfg.Name)
	require.Len(t, cfg.Nodes, 1)
	node := cfg.Nodes[0]
	assert.Equal(t, v1alpha4.ControlPlaneRole, node.Role)
	assert.Equal(t, kind.NodeImage, node.Image)
	assert.Contains(t, kind.NodeImage, "kindest/node:v1.37.0@sha256:")
	assert.Equal(t, map[string]string{"ingress-ready": "true"}, node.Labels)
	require.Len(t, node.ExtraPortMappings, 2)
	assert.Equal(t, int32(80), node.ExtraPortMappings[0].HostPort)
	assert.Equal(t, int32(443), node.ExtraPortMappings[1].HostPort)
	require.Len(t, node.ExtraMounts, 1)
	policy, err := os.ReadFile(node.ExtraMounts[0].HostPath)
	require.NoError(t, err)
	assert.Contains(t, string(policy), "omitStages: [\"RequestReceived\"]")
	assert.Contains(t, string(policy), "- level: Metadata")
	assert.True(t, filepath.IsAbs(node.ExtraMounts[0].HostPath))
	require.Len(t, cfg.KubeadmConfigPatches, 1)
	assertAuditPatch(t, cfg.KubeadmConfigPatches[0], node.ExtraMounts[0].ContainerPath)

	assert.Equal(t, "kind", c.Provider)
	assert.Equal(t, "kind-k8s-operators-course", c.Context)
	assert.False(t, c.Reused)
	assert.True(t, c.Env.RealPods)
	assert.NotNil(t, c.Env.AuditLog)
	assert.Equal(t, f.p.Dir(cluster.DefaultName), c.Env.StateDir)
	assert.FileExists(t, c.Kubeconfig)

	user, err := clientcmd.LoadFromFile(f.userKC)
	require.NoError(t, err)
	assert.Equal(t, "kind-k8s-operators-course", user.CurrentContext)
	assert.Contains(t, user.Contexts, "kind-k8s-operators-course")

	// Up again: reused, nothing created.
	c, err = f.up(cluster.DefaultName)
	require.NoError(t, err)
	assert.True(t, c.Reused)
	assert.Len(t, f.api.created, 1)

	// Status: node healthy, API ready.
	st, err := f.p.Status(context.Background(), cluster.DefaultName)
	require.NoError(t, err)
	assert.True(t, st.Running, "%+v", st.Components)

	// Down: kind deletes, the context leaves the user's kubeconfig.
	require.NoError(t, f.p.Down(context.Background(), cluster.DefaultName))
	assert.Equal(t, []string{cluster.DefaultName}, f.api.deleted)
	user, err = clientcmd.LoadFromFile(f.userKC)
	require.NoError(t, err)
	assert.NotContains(t, user.Contexts, "kind-k8s-operators-course")
	assert.NoDirExists(t, f.p.Dir(cluster.DefaultName))
}

// assertAuditPatch checks the kubeadm patch: extraArgs pointing at the
// mounted policy, and volumes for policy and log; no apiVersion, so it
// applies to any kubeadm config version kind generates.
func assertAuditPatch(t *testing.T, patch, policyInNode string) {
	t.Helper()
	var p struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		APIServer  struct {
			ExtraArgs    map[string]string `json:"extraArgs"`
			ExtraVolumes []struct {
				Name      string `json:"name"`
				HostPath  string `json:"hostPath"`
				MountPath string `json:"mountPath"`
				ReadOnly  bool   `json:"readOnly"`
			} `json:"extraVolumes"`
		} `json:"apiServer"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(patch), &p), patch)
	assert.Empty(t, p.APIVersion)
	assert.Equal(t, "ClusterConfiguration", p.Kind)
	args := p.APIServer.ExtraArgs
	assert.Equal(t, policyInNode, args["audit-policy-file"])
	assert.Equal(t, kind.AuditLogPath, args["audit-log-path"])
	mounts := map[string]string{}
	for _, v := range p.APIServer.ExtraVolumes {
		assert.Equal(t, v.HostPath, v.MountPath)
		mounts[v.MountPath] = v.Name
	}
	assert.Contains(t, mounts, filepath.Dir(policyInNode))
	assert.Contains(t, mounts, filepath.Dir(kind.AuditLogPath))
}

// comeBack plays a restarted cluster on the local control plane: the
// node's kubelet and the controller manager and scheduler renew their
// leases, and the node is Ready.
func comeBack(t *testing.T, env *testcluster.Cluster, node string) func() {
	return func() {
		ctx := context.Background()
		cs, err := kubernetes.NewForConfig(env.Config)
		require.NoError(t, err)
		now := metav1.NewMicroTime(time.Now())
		for _, l := range []struct{ ns, name string }{{"kube-node-lease", node}, {"kube-system", "kube-controller-manager"}, {"kube-system", "kube-scheduler"}} {
			_ = cs.CoordinationV1().Leases(l.ns).Delete(ctx, l.name, metav1.DeleteOptions{})
			_, err := cs.CoordinationV1().Leases(l.ns).Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: l.name},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.name), RenewTime: &now},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = cs.CoordinationV1().Leases(l.ns).Delete(context.Background(), l.name, metav1.DeleteOptions{})
			})
		}
		_, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
		// A patch, not an update: kwok and the node controller write the
		// node too.
		stamp := time.Now().UTC().Format(time.RFC3339)
		ready := `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"` + stamp + `","lastTransitionTime":"` + stamp + `"}]}}`
		_, err = cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(ready), metav1.PatchOptions{}, "status")
		require.NoError(t, err)
	}
}

// A node image built where no registry answers (labctl build node-image)
// replaces the pinned one when up is given it.
func TestUpUsesTheNodeImageItIsGiven(t *testing.T) {
	env := apiServer(t)
	f := newFixture(t, "docker")
	f.api.kubeconfig = kindKubeconfig(t, env, cluster.DefaultName)
	_, err := f.p.Up(context.Background(), cluster.UpOptions{Name: cluster.DefaultName, Streams: f.s, KubeconfigPath: f.userKC,
		NodeImage: "labctl/kind-node:v1.37.2-0123456789ab"})
	require.NoError(t, err, f.errOut.String())
	require.Len(t, f.api.created, 1)
	require.Len(t, f.api.created[0].Nodes, 1)
	assert.Equal(t, "labctl/kind-node:v1.37.2-0123456789ab", f.api.created[0].Nodes[0].Image)
}

func TestUpReusesAndStartsStoppedDockerNodes(t *testing.T) {
	env := apiServer(t)
	f := newFixture(t, "docker")
	f.api.kubeconfig = kindKubeconfig(t, env, "lab")
	f.exists("lab", false)
	f.cts.onStart = comeBack(t, env, "lab-control-plane")
	c, err := f.up("lab")
	require.NoError(t, err, f.errOut.String())
	assert.True(t, c.Reused)
	assert.Empty(t, f.api.created)
	assert.Equal(t, 1, f.r.Called("docker start lab-control-plane"))
}

func TestUpStartedNodesMustBecomeHealthy(t *testing.T) {
	env := apiServer(t)
	f := newFixture(t, "docker")
	f.api.kubeconfig = kindKubeconfig(t, env, "sick")
	f.exists("sick", false)
	// /readyz passes, but no kubelet or controller renews a lease.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := f.p.Up(ctx, cluster.UpOptions{Name: "sick", Streams: f.s, KubeconfigPath: f.userKC})
	require.Error(t, err)
	msg := userr.Message(err)
	assert.Contains(t, msg, `kind cluster "sick" started again but is not healthy`)
	assert.Contains(t, msg, "sick-control-plane")
	assert.Contains(t, msg, "labctl reset --cluster")
}

func TestUpPodmanClusterAfterReboot(t *testing.T) {
	t.Run("says how to recreate it", func(t *testing.T) {
		f := newFixture(t, "podman")
		f.exists("lab", false)
		_, err := f.up("lab")
		require.Error(t, err)
		msg := userr.Message(err)
		assert.Contains(t, msg, `kind cluster "lab" is stopped (after a reboot?), and kind cannot restart Podman nodes`)
		assert.Contains(t, msg, "labctl down --provider kind --name lab")
		assert.Zero(t, f.r.Called("podman start"), "a Podman node is never restarted")
		assert.Empty(t, f.api.deleted)
	})
	t.Run("recreates it with consent", func(t *testing.T) {
		f := newFixture(t, "podman")
		f.exists("lab", false)
		var asked string
		f.p.Confirm = func(q string) bool { asked = q; return true }
		f.api.createErr = errors.New("stop here")
		_, err := f.up("lab")
		require.Error(t, err)
		assert.Contains(t, asked, "kind cannot restart Podman nodes")
		assert.Equal(t, []string{"lab"}, f.api.deleted)
		assert.Len(t, f.api.created, 1)
		assert.Zero(t, f.r.Called("podman start"))
	})
	t.Run("asks on a terminal", func(t *testing.T) {
		f := newFixture(t, "podman")
		f.s, _, f.errOut = iostreams.Test(true)
		f.s.In = strings.NewReader("y\n")
		f.exists("lab", false)
		f.api.createErr = errors.New("stop here")
		_, err := f.up("lab")
		require.Error(t, err)
		assert.Contains(t, f.errOut.String(), "Delete it and create it again (the lab's objects in it are lost)? [y/N]")
		assert.Equal(t, []string{"lab"}, f.api.deleted)
		assert.Len(t, f.api.created, 1)
	})
	t.Run("declined", func(t *testing.T) {
		f := newFixture(t, "podman")
		f.exists("lab", false)
		f.p.Confirm = func(string) bool { return false }
		_, err := f.up("lab")
		require.Error(t, err)
		assert.Empty(t, f.api.deleted)
	})
}

// createdConfig runs Up until kind is asked to create the cluster and
// returns that configuration (kind then fails, so no API is needed).
func (f *fixture) createdConfig(t *testing.T, name string) *v1alpha4.Cluster {
	t.Helper()
	f.api.createErr = errors.New("stop here")
	_, err := f.up(name)
	require.Error(t, err)
	require.Len(t, f.api.created, 1)
	return f.api.created[0]
}

func hostPorts(cfg *v1alpha4.Cluster) []int32 {
	var out []int32
	for _, m := range cfg.Nodes[0].ExtraPortMappings {
		out = append(out, m.HostPort)
	}
	return out
}

func TestConfigFollowsTheHost(t *testing.T) {
	t.Run("cgroup v2: audit patch only, ports 80/443 on all addresses", func(t *testing.T) {
		f := newFixture(t, "docker")
		cfg := f.createdConfig(t, "lab")
		assert.Len(t, cfg.KubeadmConfigPatches, 1)
		assert.Equal(t, []int32{80, 443}, hostPorts(cfg))
		for _, m := range cfg.Nodes[0].ExtraPortMappings {
			assert.Equal(t, kind.ListenAddress, m.ListenAddress, "the address the port probe checks")
		}
		assert.NotContains(t, f.errOut.String(), "cgroup v1")
	})
	t.Run("cgroup v1: kubelet told failCgroupV1: false", func(t *testing.T) {
		f := newFixture(t, "docker")
		f.r.Info("docker", engine.Facts{CgroupVersion: "1", Arch: "amd64"})
		cfg := f.createdConfig(t, "lab")
		require.Len(t, cfg.KubeadmConfigPatches, 2)
		var patch map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(cfg.KubeadmConfigPatches[1]), &patch))
		assert.Equal(t, map[string]any{"kind": "KubeletConfiguration", "failCgroupV1": false}, patch)
		assert.Contains(t, f.errOut.String(), "this host uses cgroup v1")
	})
	t.Run("podman on cgroup v1 too", func(t *testing.T) {
		f := newFixture(t, "podman")
		f.r.Info("podman", engine.Facts{CgroupVersion: "1", Arch: "amd64"})
		cfg := f.createdConfig(t, "lab")
		assert.Len(t, cfg.KubeadmConfigPatches, 2)
	})
	t.Run("rootless: high ports, said plainly", func(t *testing.T) {
		f := newFixture(t, "podman")
		f.r.Info("podman", engine.Facts{CgroupVersion: "2", Arch: "amd64", Rootless: true})
		f.p.UnprivilegedPortStart = func() int { return 1024 }
		cfg := f.createdConfig(t, "lab")
		assert.Equal(t, []int32{8080, 8443}, hostPorts(cfg))
		assert.Contains(t, f.errOut.String(), "rootless podman cannot publish ports below 1024")
		assert.Contains(t, f.errOut.String(), "http://localhost:8080 and https://localhost:8443 instead of 80/443")
	})
	t.Run("rootless docker where the host allows port 80", func(t *testing.T) {
		f := newFixture(t, "docker")
		f.r.Info("docker", engine.Facts{CgroupVersion: "2", Arch: "amd64", Rootless: true})
		f.p.UnprivilegedPortStart = func() int { return 80 }
		assert.Equal(t, []int32{80, 443}, hostPorts(f.createdConfig(t, "lab")))
	})
	t.Run("rootless with the high port taken: none", func(t *testing.T) {
		f := newFixture(t, "podman")
		f.r.Info("podman", engine.Facts{CgroupVersion: "2", Arch: "amd64", Rootless: true})
		f.p.UnprivilegedPortStart = func() int { return 1024 }
		f.p.PortInUse = func(port int) bool { return port == 8443 }
		assert.Empty(t, hostPorts(f.createdConfig(t, "lab")))
		assert.Contains(t, f.errOut.String(), "port 8443 is in use")
	})
	t.Run("docker from snap: the policy where snap can see it", func(t *testing.T) {
		f := newFixture(t, "docker")
		f.r.Info("docker", engine.Facts{CgroupVersion: "2", Arch: "amd64", Snap: true})
		f.p.VisibleRoot = filepath.Join(t.TempDir(), "labctl", "kind")
		cfg := f.createdConfig(t, "lab")
		policy := cfg.Nodes[0].ExtraMounts[0].HostPath
		assert.Equal(t, filepath.Join(f.p.VisibleRoot, "lab", "audit-policy.yaml"), policy)
		assert.FileExists(t, policy)
		assert.Contains(t, f.errOut.String(), "Docker from snap cannot read hidden directories")
		// down removes it with the cluster.
		f.exists("lab", true)
		require.NoError(t, f.p.Down(context.Background(), "lab"))
		assert.NoDirExists(t, filepath.Join(f.p.VisibleRoot, "lab"))
	})
	t.Run("engine facts unreadable", func(t *testing.T) {
		f := newFixture(t, "docker")
		f.r.OnFail("docker info --format {{json .}}", 1, "error during connect\n")
		_, err := f.up("lab")
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "cannot read what docker says about its host")
		assert.Empty(t, f.api.created)
	})
}

func TestHalfMadeClusterIsRecreated(t *testing.T) {
	f := newFixture(t, "docker")
	f.api.block, f.api.entered, f.api.returned = make(chan struct{}), make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := f.p.Up(ctx, cluster.UpOptions{Name: "lab", Streams: f.s, KubeconfigPath: f.userKC})
		errc <- err
	}()
	// Ctrl-C while kind creates the nodes.
	<-f.api.entered
	cancel()
	err := <-errc
	require.Error(t, err)
	assert.Equal(t, userr.ExitInterrupted, userr.Code(err))
	assert.Contains(t, userr.Message(err), "the next `labctl up` deletes the half-made cluster")
	close(f.api.block)
	<-f.api.returned
	// The process died here; kind left a node behind.
	f.api.mu.Lock()
	f.api.created, f.api.block = nil, nil
	f.api.mu.Unlock()
	f.exists("lab", true)

	f.api.createErr = errors.New("stop here")
	_, err = f.up("lab")
	require.Error(t, err)
	assert.Contains(t, f.errOut.String(), `kind cluster "lab" is half-made`)
	assert.Equal(t, []string{"lab"}, f.api.deleted)
	assert.Len(t, f.api.created, 1, "created again")
}

func TestNodesAreTheInternalOnes(t *testing.T) {
	f := newFixture(t, "docker")
	cp := f.exists("lab", true)
	lb := enginetest.NewNode("lab-external-load-balancer")
	lb.RoleName = "external-load-balancer"
	w := enginetest.NewNode("lab-worker")
	w.RoleName = "worker"
	f.api.clusters["lab"] = append(f.api.clusters["lab"], lb, w)
	_, ns, err := f.p.Nodes(context.Background(), "lab")
	require.NoError(t, err)
	var names []string
	for _, n := range ns {
		names = append(names, n.String())
	}
	assert.Equal(t, []string{cp.Name, "lab-worker"}, names)
}

// TestPortInUseSeesEveryAddress: kind publishes on all addresses, so a
// program listening on any one of them takes the port (dialing 127.0.0.1
// alone misses one on 127.0.0.2).
func TestPortInUseSeesEveryAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2 here: %v", err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	assert.True(t, kind.PortInUse(port))
	l.Close()
	assert.False(t, kind.PortInUse(port))
}

func TestUpWithoutPortsWhenTaken(t *testing.T) {
	env := apiServer(t)
	f := newFixture(t, "docker")
	f.api.kubeconfig = kindKubeconfig(t, env, "ports")
	f.p.PortInUse = func(port int) bool { return port == 443 }
	_, err := f.up("ports")
	require.NoError(t, err, f.errOut.String())
	assert.Empty(t, f.api.created[0].Nodes[0].ExtraPortMappings)
	assert.Contains(t, f.errOut.String(), "port 443 is in use")
}

func TestUpErrors(t *testing.T) {
	t.Run("no engine", func(t *testing.T) {
		f := newFixture(t, "docker")
		f.r = enginetest.NewRunner()
		f.p.Runner = f.r
		_, err := f.up("lab")
		require.Error(t, err)
		assert.Equal(t, userr.ExitEnvironment, userr.Code(err))
		assert.Contains(t, userr.Message(err), "no container engine")
		assert.Empty(t, f.api.created)
	})
	t.Run("daemon down", func(t *testing.T) {
		f := newFixture(t, "docker")
		f.p.Runner = enginetest.NewRunner().DaemonDown("docker")
		_, err := f.up("lab")
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "docker is installed but not running")
		assert.Contains(t, userr.Message(err), "systemctl start docker")
	})
	t.Run("invalid name", func(t *testing.T) {
		f := newFixture(t, "docker")
		_, err := f.up("Lab_1")
		require.Error(t, err)
		assert.Equal(t, userr.ExitUsage, userr.Code(err))
	})
	t.Run("name taken by a non-kind container", func(t *testing.T) {
		f := newFixture(t, "docker")
		f.cts.state["lab-control-plane"] = &engine.Container{Exists: true, Running: true, Labels: map[string]string{"maintainer": "someone"}}
		_, err := f.up("lab")
		require.Error(t, err)
		msg := userr.Message(err)
		assert.Contains(t, msg, `the name "lab" is taken: a docker container lab-control-plane exists that is not a node of kind cluster "lab"`)
		assert.Contains(t, msg, "docker rm -f lab-control-plane")
		assert.Contains(t, msg, "--name")
		assert.Empty(t, f.api.created, "kind not asked to create")
	})
	t.Run("kubeconfig read-only", func(t *testing.T) {
		f := newFixture(t, "docker")
		require.NoError(t, os.WriteFile(f.userKC, []byte("apiVersion: v1\nkind: Config\n"), 0o400))
		if os.Geteuid() == 0 {
			// root ignores file modes: make the file immutable instead.
			if err := exec.Command("chattr", "+i", f.userKC).Run(); err != nil {
				t.Skipf("running as root and chattr +i is not possible here: %v", err)
			}
			t.Cleanup(func() { _ = exec.Command("chattr", "-i", f.userKC).Run() })
		}
		_, err := f.up("lab")
		require.Error(t, err)
		msg := userr.Message(err)
		assert.NotContains(t, msg, "\n")
		assert.Contains(t, msg, "cannot write kubeconfig "+f.userKC+": permission denied")
		assert.Contains(t, msg, "set KUBECONFIG")
		assert.Empty(t, f.api.created, "checked before a minute of cluster creation")
	})
	t.Run("kind fails to create", func(t *testing.T) {
		f := newFixture(t, "docker")
		f.api.createErr = errors.New("failed to create cluster: command \"docker run --name lab-control-plane\" failed with error: exit status 125\nBind for 0.0.0.0:80 failed: port is already allocated")
		_, err := f.up("lab")
		require.Error(t, err)
		msg := userr.Message(err)
		assert.NotContains(t, msg, "\n")
		assert.Contains(t, msg, `kind could not create cluster "lab"`)
		assert.Contains(t, msg, "port is already allocated")
		assert.Contains(t, msg, "-v")
	})
	t.Run("the engine's own reason", func(t *testing.T) {
		// kind's error names the command and its exit status; what the
		// engine printed is in the RunError's output.
		f := newFixture(t, "podman")
		f.api.createErr = fmt.Errorf("failed to create cluster: %w", &kindexec.RunError{
			Command: []string{"podman", "run", "--name", "lab-control-plane"},
			Output:  []byte("Trying to pull...\nError: runc: runc create failed: unable to start container process: OCI permission denied\n"),
			Inner:   errors.New("exit status 126"),
		})
		_, err := f.up("lab")
		require.Error(t, err)
		msg := userr.Message(err)
		assert.NotContains(t, msg, "\n")
		assert.Contains(t, msg, "exit status 126: Error: runc: runc create failed: unable to start container process: OCI permission denied")
	})
}

func TestAuditLogReadsFromTheNode(t *testing.T) {
	env := apiServer(t)
	f := newFixture(t, "docker")
	f.api.kubeconfig = kindKubeconfig(t, env, "audit")
	f.exists("audit", true)
	f.r.On("docker exec audit-control-plane cat "+kind.AuditLogPath, func(c engine.Cmd) error {
		_, err := io.WriteString(c.Stdout, `{"verb":"create"}`+"\n")
		return err
	})
	c, err := f.p.Get(context.Background(), "audit")
	require.NoError(t, err)
	rc, err := c.Env.AuditLog(context.Background())
	require.NoError(t, err)
	raw, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.Equal(t, `{"verb":"create"}`+"\n", string(raw))

	f.r.OnFail("docker exec audit-control-plane cat", 1, "cat: /var/log/kubernetes/audit/audit.log: No such file or directory")
	rc, err = c.Env.AuditLog(context.Background())
	require.NoError(t, err)
	_, err = io.ReadAll(rc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "No such file or directory")
}

func TestGetAndDownNotFound(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "docker")
	_, err := f.p.Get(ctx, "nope")
	assert.True(t, errors.Is(err, cluster.ErrNotFound), "%v", err)
	_, err = f.p.Status(ctx, "nope")
	assert.True(t, errors.Is(err, cluster.ErrNotFound))
	err = f.p.Down(ctx, "nope")
	assert.True(t, errors.Is(err, cluster.ErrNotFound))
	assert.Contains(t, userr.Message(err), `there is no kind cluster named "nope"`)

	// No engine at all: every kind cluster is "not found", so commands
	// trying each provider go on to the next one.
	f.p.Runner = enginetest.NewRunner()
	f.p = &kind.Provider{Runner: enginetest.NewRunner(), Getenv: func(string) string { return "" }, StateRoot: t.TempDir()}
	_, err = f.p.Get(ctx, "nope")
	assert.True(t, errors.Is(err, cluster.ErrNotFound), "%v", err)
	assert.Contains(t, userr.Message(err), "no container engine")
	names, err := f.p.List(ctx)
	assert.NoError(t, err)
	assert.Empty(t, names)

	// An engine asked for by name that is missing is an error to report,
	// not an empty list.
	f.p = &kind.Provider{Runner: enginetest.NewRunner(), Engine: "podman", Getenv: func(string) string { return "" }, StateRoot: t.TempDir()}
	_, err = f.p.List(ctx)
	assert.Error(t, err)
}

func TestGetStoppedCluster(t *testing.T) {
	f := newFixture(t, "docker")
	f.exists("lab", false)
	_, err := f.p.Get(context.Background(), "lab")
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), `kind cluster "lab" is stopped`)
	assert.Contains(t, userr.Message(err), "labctl up --provider kind --name lab")
}

func TestEngineRecordedAtCreation(t *testing.T) {
	env := apiServer(t)
	f := newFixture(t, "podman")
	f.api.kubeconfig = kindKubeconfig(t, env, "pod")
	_, err := f.up("pod")
	require.NoError(t, err, f.errOut.String())
	// Docker also runs now; a fresh provider still finds the Podman
	// cluster because the engine was recorded.
	f.r.Running("docker", "27.1.0")
	p2 := &kind.Provider{Runner: f.r, Getenv: func(string) string { return "" }, StateRoot: f.p.StateRoot,
		NewAPI: func(e *engine.Engine, _ kind.Progress) kind.API {
			assert.Equal(t, "podman", e.Name)
			return f.api
		}}
	e, ns, err := p2.Nodes(context.Background(), "pod")
	require.NoError(t, err)
	assert.Equal(t, "podman", e.Name)
	assert.Len(t, ns, 1)
}

func TestStatusText(t *testing.T) {
	for in, want := range map[string]string{
		" • Ensuring node image (kindest/node:v1.37.0) 🖼  ...\n": "Ensuring node image",
		" ✓ Preparing nodes 📦 \n":                                "Preparing nodes",
		"Creating cluster \"x\" ...\n":                           "Creating cluster \"x\"",
	} {
		var got string
		p := kind.Progress{Status: func(s string) { got = s }}
		kind.LogInfoForTest(p, in)
		assert.Equal(t, want, got, in)
	}
}

func TestDetect(t *testing.T) {
	ctx := context.Background()
	detect := func(r *enginetest.Runner, eng string, env map[string]string) (string, string) {
		p := &kind.Provider{Runner: r, Engine: eng, Getenv: func(k string) string { return env[k] }}
		return p.Detect("local")(ctx)
	}
	name, why := detect(enginetest.NewRunner().DaemonDown("docker").Running("podman", "5.0.1"), "", nil)
	assert.Equal(t, "kind", name)
	assert.Equal(t, "podman 5.0.1 is running", why)

	name, why = detect(enginetest.NewRunner().DaemonDown("docker"), "", nil)
	assert.Equal(t, "local", name)
	assert.Equal(t, "no container engine running", why)

	name, _ = detect(enginetest.NewRunner(), "", nil)
	assert.Equal(t, "local", name)

	// Asked for an engine: kind, so that its failure is reported.
	name, why = detect(enginetest.NewRunner(), "podman", nil)
	assert.Equal(t, "kind", name)
	assert.Equal(t, "--engine podman", why)
	name, why = detect(enginetest.NewRunner(), "", map[string]string{engine.EnvProvider: "docker"})
	assert.Equal(t, "kind", name)
	assert.Equal(t, "KIND_EXPERIMENTAL_PROVIDER=docker", why)
}

// upRecorder is a provider that records Up.
type upRecorder struct{ name string }

func (u *upRecorder) Name() string { return u.name }
func (u *upRecorder) Up(_ context.Context, o cluster.UpOptions) (*cluster.Cluster, error) {
	return &cluster.Cluster{Name: o.Name, Provider: u.name, Context: "labctl-" + o.Name, Kubeconfig: "/x"}, nil
}
func (u *upRecorder) Get(context.Context, string) (*cluster.Cluster, error) {
	return nil, cluster.ErrNotFound
}
func (u *upRecorder) Down(context.Context, string) error { return nil }
func (u *upRecorder) Status(context.Context, string) (*cluster.Health, error) {
	return nil, cluster.ErrNotFound
}

// TestUpFallsBackToLocal runs `labctl up` wired as main wires it, with
// Docker installed but its daemon down and no Podman: the local provider
// is used, and the user is told why.
func TestUpFallsBackToLocal(t *testing.T) {
	kp := &kind.Provider{Runner: enginetest.NewRunner().DaemonDown("docker"), Getenv: func(string) string { return "" }}
	s, out, errOut := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{
		ByName: map[string]cluster.Provider{"local": &upRecorder{name: "local"}, "kind": kp},
		Detect: kp.Detect("local"),
	}}
	cmd := up.NewCommand(f, nil)
	cmd.SetArgs([]string{"--no-operator"})
	cmd.SetOut(io.Discard)
	require.NoError(t, cmd.Execute())
	assert.Contains(t, errOut.String(), "Provider: local (no container engine running)")
	assert.Contains(t, out.String(), "cluster k8s-operators-course is ready")

	// Explicitly asking for kind reports the engine problem instead.
	cmd = up.NewCommand(f, nil)
	cmd.SetArgs([]string{"--provider", "kind", "--no-operator"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), "docker is installed but not running")
}
