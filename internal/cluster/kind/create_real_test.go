package kind_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/testkind"
)

// Environment of TestKindCreatesTheNodeForReal.
const (
	// KubeadmEnv names the kubeadm that checks the kubeadm config kind
	// wrote into the node (`kubeadm config validate`); default upstream's,
	// built by controlplane.Kubeadm.
	KubeadmEnv = "LABCTL_KUBEADM"
	// KubeadmConfigEnv is where that config is saved (default
	// $XDG_CACHE_HOME/labctl/testkind/kubeadm.conf).
	KubeadmConfigEnv = "LABCTL_KUBEADM_CONFIG"
)

// TestKindCreatesTheNodeForReal runs `labctl up --provider kind` through
// kind's real create, stopped where kubeadm would start, on testkind's
// node image: the real `docker run` with labctl's cluster config (audit
// policy mount, port mappings, labels), then kind's kubeadm config written
// into the node, read back and checked for labctl's patches.
func TestKindCreatesTheNodeForReal(t *testing.T) { kindCreatesTheNode(t, engine.Docker) }

// TestKindCreatesTheNodeForRealPodman is the same with Podman.
func TestKindCreatesTheNodeForRealPodman(t *testing.T) { kindCreatesTheNode(t, engine.Podman) }

func kindCreatesTheNode(t *testing.T, name string) {
	te := testkind.Setup(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	versions := testkind.DefaultVersions()
	nodeImage := te.NodeImage(t, ctx, versions)
	te.AllowPrivileged(t, ctx, nodeImage)

	clusterName := testkind.RandomName("labctl-t")
	// A network of the test's own, removed with it (kind keeps "kind").
	network := clusterName
	t.Setenv("KIND_EXPERIMENTAL_"+strings.ToUpper(name)+"_NETWORK", network)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := te.Run(ctx, "network", "ls", "-q", "--filter", "name=^"+network+"$"); err == nil && len(strings.TrimSpace(string(out))) > 0 {
			if _, err := te.Run(ctx, "network", "rm", network); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	stateRoot := t.TempDir()
	prov := &kind.Provider{Engine: name, StateRoot: stateRoot, NodeImage: nodeImage, NewAPI: kind.StopBeforeKubernetesForTest}
	node := kind.ControlPlaneNode(clusterName)
	t.Cleanup(func() {
		// labctl down: kind's delete, which also removes the volume kind's
		// Podman provider made for the node's /var.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := prov.Down(ctx, clusterName); err != nil {
			t.Errorf("cleanup: labctl down: %v", err)
		}
		te.RemoveContainer(t, node)
		te.RemoveVolumes(t, node)
	})
	facts, err := engine.New(name, nil).Facts(ctx)
	require.NoError(t, err)
	// The ingress ports labctl asks for: 80/443, 8080/8443 for a rootless
	// engine that cannot publish low ports, none when one is taken.
	http, https := 80, 443
	if facts.Rootless && kind.UnprivilegedPortStart() > http {
		http, https = 8080, 8443
	}
	mapPorts := !kind.PortInUse(http) && !kind.PortInUse(https)

	s, _, errOut := iostreams.Test(false)
	start := time.Now()
	_, err = prov.Up(ctx, cluster.UpOptions{Name: clusterName, Streams: s, SkipKubeconfigMerge: true})
	t.Logf("labctl up (kind create, stopped before kubeadm) took %s", time.Since(start).Round(time.Millisecond))
	// kubeadm never ran, so there is no admin kubeconfig: Up stops there.
	require.Error(t, err, "Up cannot succeed without kubeadm")
	require.Contains(t, err.Error(), "cannot read the kubeconfig of kind cluster "+clusterName, "kind's create itself must succeed; stderr: %s", errOut.String())

	// The node as `docker run` made it from labctl's cluster config.
	out, err := te.Run(ctx, "inspect", node)
	require.NoError(t, err)
	var inspect []struct {
		Config struct {
			Labels map[string]string `json:"Labels"`
		} `json:"Config"`
		Mounts []struct {
			Type, Source, Destination string
			RW                        bool
		} `json:"Mounts"`
		HostConfig struct {
			PortBindings map[string][]struct{ HostIP, HostPort string } `json:"PortBindings"`
		} `json:"HostConfig"`
	}
	require.NoError(t, json.Unmarshal(out, &inspect))
	require.Len(t, inspect, 1)
	in := inspect[0]
	assert.Equal(t, clusterName, in.Config.Labels[testkind.ClusterLabel])
	assert.Equal(t, "control-plane", in.Config.Labels[testkind.RoleLabel])
	found := false
	for _, m := range in.Mounts {
		if m.Destination == "/etc/kubernetes/labctl/audit-policy.yaml" {
			found = true
			assert.Equal(t, "audit-policy.yaml", filepath.Base(m.Source))
			assert.False(t, m.RW, "the audit policy is mounted read-only")
		}
	}
	assert.True(t, found, "no audit-policy mount in %+v", in.Mounts)
	assert.Contains(t, in.HostConfig.PortBindings, "6443/tcp", "the API server port")
	if mapPorts {
		for container, host := range map[string]int{"80/tcp": http, "443/tcp": https} {
			b := in.HostConfig.PortBindings[container]
			if assert.Len(t, b, 1, "port %s", container) {
				assert.Equal(t, strconv.Itoa(host), b[0].HostPort)
			}
		}
	} else {
		t.Logf("port %d or %d is taken on this machine: the cluster was created without the ingress mapping", http, https)
		assert.NotContains(t, in.HostConfig.PortBindings, "80/tcp")
	}

	// kind's kubeadm config, read back from the node with labctl's reader.
	r := kind.ReadNodeFile(ctx, engine.New(name, nil), node, "/kind/kubeadm.conf")
	raw, err := io.ReadAll(r)
	r.Close()
	require.NoError(t, err)
	saved := os.Getenv(KubeadmConfigEnv)
	if saved == "" {
		dir, err := testkind.CacheDir()
		require.NoError(t, err)
		saved = filepath.Join(dir, "kubeadm.conf")
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(saved), 0o755))
	require.NoError(t, os.WriteFile(saved, raw, 0o644))
	t.Logf("kind's kubeadm config (%d bytes) saved to %s", len(raw), saved)

	docs := kubeadmDocs(t, raw)
	cc, ok := docs["ClusterConfiguration"]
	require.True(t, ok, "no ClusterConfiguration in %s", raw)
	assert.Equal(t, "kubeadm.k8s.io/v1beta4", cc["apiVersion"], "kind uses v1beta4 for Kubernetes %s", versions.Kubernetes)
	assert.Equal(t, versions.Kubernetes, cc["kubernetesVersion"])
	apiServer, _ := cc["apiServer"].(map[string]any)
	args := map[string]string{}
	extraArgs, _ := apiServer["extraArgs"].([]any)
	for _, a := range extraArgs {
		if m, ok := a.(map[string]any); ok {
			n, _ := m["name"].(string)
			v, _ := m["value"].(string)
			args[n] = v
		}
	}
	assert.Equal(t, "/etc/kubernetes/labctl/audit-policy.yaml", args["audit-policy-file"])
	assert.Equal(t, kind.AuditLogPath, args["audit-log-path"])
	assert.Equal(t, "200", args["audit-log-maxsize"])
	assert.Equal(t, "1", args["audit-log-maxbackup"])
	assert.Contains(t, args, "runtime-config", "kind's own apiServer args are kept beside labctl's")
	volumes := map[string]map[string]any{}
	extraVolumes, _ := apiServer["extraVolumes"].([]any)
	for _, v := range extraVolumes {
		if m, ok := v.(map[string]any); ok {
			n, _ := m["name"].(string)
			volumes[n] = m
		}
	}
	if assert.Contains(t, volumes, "labctl-audit-policy") {
		assert.Equal(t, "/etc/kubernetes/labctl", volumes["labctl-audit-policy"]["hostPath"])
		assert.Equal(t, true, volumes["labctl-audit-policy"]["readOnly"])
	}
	if assert.Contains(t, volumes, "labctl-audit-log") {
		assert.Equal(t, "/var/log/kubernetes/audit", volumes["labctl-audit-log"]["mountPath"])
	}
	assert.Contains(t, string(raw), "ingress-ready=true", "the node label of the course's ingress")
	if kubelet := docs["KubeletConfiguration"]; facts.CgroupV1() {
		assert.Equal(t, false, kubelet["failCgroupV1"], "a cgroup v1 host gets the kubelet patch")
	} else {
		assert.NotContains(t, kubelet, "failCgroupV1")
	}

	kubeadm := os.Getenv(KubeadmEnv)
	if kubeadm == "" {
		// The one TestKubeadmAcceptsWhatKindRenders builds (cached).
		kubeadm, err = controlplane.Kubeadm(ctx, controlplane.Options{Progress: func(f string, a ...any) { t.Logf(f, a...) }})
		require.NoError(t, err)
	}
	vout, err := exec.CommandContext(ctx, kubeadm, "config", "validate", "--config", saved).CombinedOutput()
	require.NoError(t, err, "kubeadm config validate: %s", vout)
	t.Logf("kubeadm config validate: %s", strings.TrimSpace(string(vout)))
}

// kubeadmDocs splits kind's multi-document kubeadm config by kind.
func kubeadmDocs(t *testing.T, raw []byte) map[string]map[string]any {
	t.Helper()
	docs := map[string]map[string]any{}
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		m := map[string]any{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &m), doc)
		if k, ok := m["kind"].(string); ok {
			docs[k] = m
		}
	}
	return docs
}
