package kind_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/nodeimage"
	"github.com/labctl/labctl/internal/testkind"
)

// KindE2EEnv turns on the tests that build labctl's own node image and
// create a whole kind cluster from it (`make kind-e2e`): tens of minutes
// cold, so not part of `make test` until their cost is known.
const KindE2EEnv = "LABCTL_KIND_E2E"

// TestKindClusterFromBuiltNodeImage is `labctl build node-image` then
// `labctl up --provider kind --image` for real: kind's whole create
// (kubeadm init, CNI, storage) on the image built here from Debian's
// packages and the Go module proxy, until the node is Ready.
func TestKindClusterFromBuiltNodeImage(t *testing.T) {
	if os.Getenv(KindE2EEnv) == "" {
		t.Skipf("builds a node image and a whole kind cluster: set %s=1 (make kind-e2e)", KindE2EEnv)
	}
	te := testkind.Setup(t, engine.Docker)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()

	start := time.Now()
	res, err := nodeimage.Build(ctx, nodeimage.Options{Engine: engine.New(engine.Docker, nil), ControlPlane: os.Getenv("LABCTL_BIN_DIR"),
		Progress: func(f string, a ...any) { t.Logf("build node-image: "+f, a...) }})
	require.NoError(t, err)
	for _, s := range res.Steps {
		t.Logf("build node-image: %s took %s", s.Name, s.Duration.Round(time.Second))
	}
	t.Logf("node image %s ready in %s (cached: %v)", res.Ref, time.Since(start).Round(time.Second), res.Cached)
	te.AllowPrivileged(t, ctx, res.Ref)

	clusterName := testkind.RandomName("labctl-e")
	network := clusterName
	t.Setenv("KIND_EXPERIMENTAL_DOCKER_NETWORK", network)
	prov := &kind.Provider{Engine: engine.Docker, StateRoot: t.TempDir()}
	node := kind.ControlPlaneNode(clusterName)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := prov.Down(ctx, clusterName); err != nil {
			t.Errorf("cleanup: labctl down: %v", err)
		}
		te.RemoveContainer(t, node)
		_, _ = te.Run(ctx, "network", "rm", network)
	})
	s, _, errOut := iostreams.Test(false)
	start = time.Now()
	c, err := prov.Up(ctx, cluster.UpOptions{Name: clusterName, Streams: s, SkipKubeconfigMerge: true, NodeImage: res.Ref})
	if err != nil {
		logs, _ := te.Exec(ctx, node, "journalctl", "--no-pager", "-n", "60", "-u", "kubelet", "-u", "containerd")
		t.Fatalf("labctl up --provider kind --image %s: %v\nstderr: %s\nnode journal:\n%s", res.Ref, err, errOut.String(), logs)
	}
	t.Logf("labctl up --provider kind --image: %s", time.Since(start).Round(time.Second))

	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil && nodeReady(n) {
			break
		}
		if time.Now().After(deadline) {
			pods, _ := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
			var states []string
			for _, p := range pods.Items {
				states = append(states, p.Name+"="+string(p.Status.Phase))
			}
			t.Fatalf("node %s not Ready within 5m (err %v); kube-system: %s", node, err, strings.Join(states, " "))
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("node %s Ready %s after up began", node, time.Since(start).Round(time.Second))

	// Every system pod runs from the preloaded images: the control plane,
	// kube-proxy (privileged) and CoreDNS (on the pod network).
	deadline = time.Now().Add(3 * time.Minute)
	for {
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var waiting []string
		for _, p := range pods.Items {
			if !podReady(&p) {
				waiting = append(waiting, p.Name+"="+string(p.Status.Phase))
			}
		}
		if len(waiting) == 0 && len(pods.Items) > 0 {
			t.Logf("%d kube-system pods Ready %s after up began", len(pods.Items), time.Since(start).Round(time.Second))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-system pods not Ready within 3m: %s", strings.Join(waiting, " "))
		}
		time.Sleep(2 * time.Second)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
