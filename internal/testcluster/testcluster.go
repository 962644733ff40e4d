// Package testcluster gives integration tests a real cluster: one local
// control plane per test package, started from TestMain and shared by the
// package's tests, which isolate themselves by namespace.
//
//	var env *testcluster.Cluster
//	func TestMain(m *testing.M) { testcluster.Main(m, &env) }
package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/local"
	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/supervise"
)

// Cluster is a running local cluster for tests.
type Cluster struct {
	*cluster.Cluster
	Provider *local.Provider
	Client   client.Client
}

// BinariesEnv names a directory of prebuilt control-plane binaries; the
// Makefile sets it after building them once.
const BinariesEnv = "LABCTL_BIN_DIR"

// Binaries returns the control-plane binaries for tests: $LABCTL_BIN_DIR,
// else whatever controlplane.Ensure finds or builds.
func Binaries(ctx context.Context) (*controlplane.Binaries, error) {
	return controlplane.Ensure(ctx, controlplane.Options{BinDir: os.Getenv(BinariesEnv)})
}

// NewProvider returns a local provider whose state lives in a fresh temp
// dir and whose processes die with the test binary.
func NewProvider() (*local.Provider, func(), error) {
	root, err := os.MkdirTemp("", "labctl-test-")
	if err != nil {
		return nil, nil, err
	}
	p := &local.Provider{
		StateRoot:    root,
		TiedToParent: true,
		Operators:    deploy.AsProcess{TiedToParent: true},
		Binaries: func(ctx context.Context, _ *iostreams.IOStreams) (*controlplane.Binaries, error) {
			return Binaries(ctx)
		},
	}
	return p, func() { _ = os.RemoveAll(root) }, nil
}

// Start brings up a cluster named name under a fresh state root.
func Start(ctx context.Context, name string) (*Cluster, func(), error) {
	p, cleanRoot, err := NewProvider()
	if err != nil {
		return nil, nil, err
	}
	s, _, errOut := iostreams.Test(false)
	c, err := p.Up(ctx, cluster.UpOptions{Name: name, Streams: s, SkipKubeconfigMerge: true})
	if err != nil {
		_ = p.Down(context.Background(), name)
		cleanRoot()
		return nil, nil, fmt.Errorf("start local cluster: %w\n%s", err, errOut.String())
	}
	cl, err := kube.NewClient(c.Config)
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = p.Down(ctx, name)
		cleanRoot()
	}
	return &Cluster{Cluster: c, Provider: p, Client: cl}, stop, nil
}

// Main starts a shared cluster, runs the package's tests and tears the
// cluster down; it exits the process. A cluster that cannot start fails
// the package: integration tests never silently skip.
func Main(m *testing.M, out **Cluster) {
	// Operators deployed by tests are supervised by this test binary
	// re-executed (see package supervise).
	supervise.MaybeRun()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	c, stop, err := Start(ctx, "test")
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
		os.Exit(1)
	}
	*out = c
	code := m.Run()
	stop()
	os.Exit(code)
}

// Namespace creates a namespace unique to t and deletes it when t ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + hex.EncodeToString(b)}}
	if err := c.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), ns) })
	return ns.Name
}
