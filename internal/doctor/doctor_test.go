package doctor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/labctl/labctl/internal/cgroup"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/engine/enginetest"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/sandbox"
)

// fakeKind stands in for the kind provider's Status.
type fakeKind struct {
	st  *cluster.Health
	err error
}

func (f *fakeKind) Name() string { return "kind" }
func (f *fakeKind) Up(context.Context, cluster.UpOptions) (*cluster.Cluster, error) {
	return nil, nil
}
func (f *fakeKind) Get(context.Context, string) (*cluster.Cluster, error) { return nil, f.err }
func (f *fakeKind) Down(context.Context, string) error                    { return nil }
func (f *fakeKind) Status(context.Context, string) (*cluster.Health, error) {
	return f.st, f.err
}

type env struct {
	o      *Options
	r      *enginetest.Runner
	kind   *fakeKind
	s      *iostreams.IOStreams
	cache  string
	inUse  map[int]bool
	free   uint64
	stdout func() string
}

func newEnv(t *testing.T, tty bool) *env {
	t.Helper()
	s, out, _ := iostreams.Test(tty)
	e := &env{
		r:     enginetest.NewRunner("go").OnOutput("go version", "go version go1.26.8 linux/amd64\n"),
		kind:  &fakeKind{err: fmt.Errorf("kind cluster: %w", cluster.ErrNotFound)},
		s:     s,
		cache: t.TempDir(),
		inUse: map[int]bool{},
		free:  60 << 30,
	}
	e.stdout = out.String
	e.o = &Options{
		Kind: e.kind, Runner: e.r, Getenv: func(string) string { return "" },
		Kubeconfig: kubeconfig(t, "", nil),
		CacheDir:   e.cache,
		FreeBytes:  func(string) (uint64, error) { return e.free, nil },
		PortInUse:  func(p int) bool { return e.inUse[p] },
		Sandbox: func() sandbox.Support {
			return sandbox.Support{OK: true, Overlay: true, Cgroups: cgroup.Support{Version: 2, Controllers: []string{"pids", "memory", "cpu"}}}
		},
	}
	return e
}

func kubeconfig(t *testing.T, current string, servers map[string]string) string {
	cfg := clientcmdapi.NewConfig()
	for n, srv := range servers {
		cfg.Clusters[n] = &clientcmdapi.Cluster{Server: srv}
		cfg.AuthInfos[n] = &clientcmdapi.AuthInfo{Token: "x"}
		cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n}
	}
	cfg.CurrentContext = current
	p := filepath.Join(t.TempDir(), "config")
	require.NoError(t, clientcmd.WriteToFile(*cfg, p))
	return p
}

func versionServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"gitVersion":"v1.37.0"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// report runs the probes and prints them, as `labctl doctor` does; it
// returns whether none failed.
func (e *env) report(ctx context.Context) bool {
	probes := Run(ctx, e.o)
	Print(e.s, probes)
	return !Failed(probes)
}

func byName(checks []Probe) map[string]Probe {
	m := map[string]Probe{}
	for _, c := range checks {
		m[c.Name] = c
	}
	return m
}

func TestAllGood(t *testing.T) {
	e := newEnv(t, false)
	e.r.Running("docker", "27.1.0").Info("docker", engine.Facts{CgroupVersion: "2", Arch: "amd64"})
	e.kind.st, e.kind.err = &cluster.Health{Name: cluster.DefaultName, Context: "kind-k8s-operators-course", Running: true}, nil
	e.inUse[80], e.inUse[443] = true, true // the kind cluster's own mapping
	e.o.Kubeconfig = kubeconfig(t, "kind-k8s-operators-course", map[string]string{"kind-k8s-operators-course": versionServer(t)})
	bin := filepath.Join(e.cache, "controlplane", controlplane.DefaultVersions().Key(), "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, c := range controlplane.Components {
		require.NoError(t, os.WriteFile(filepath.Join(bin, c), []byte("#!/bin/sh\n"), 0o755))
	}

	require.True(t, e.report(context.Background()))
	checks := byName(Run(context.Background(), e.o))
	for name, c := range checks {
		assert.Equal(t, Pass, c.Status, "%s: %s", name, c.Detail)
	}
	assert.Equal(t, "1.26.8", checks["Go"].Detail)
	assert.Contains(t, checks["Container engine"].Detail, "using docker")
	assert.Contains(t, checks["kubeconfig context"].Detail, "reachable (Kubernetes v1.37.0)")
	assert.Contains(t, checks["Port 80"].Detail, "kind cluster")

	// Piped: tab-separated rows with plain status words.
	lines := strings.Split(strings.TrimSpace(e.stdout()), "\n")
	require.Len(t, lines, 13)
	for _, l := range lines {
		assert.Equal(t, "pass", strings.Split(l, "\t")[1], l)
	}
}

func TestNoEngineIsAWarningNotAFailure(t *testing.T) {
	e := newEnv(t, true)
	e.r.DaemonDown("docker")
	require.True(t, e.report(context.Background()), "exit 0: only warnings")
	c := byName(Run(context.Background(), e.o))
	assert.Equal(t, Warn, c["Container engine"].Status)
	assert.Contains(t, c["Container engine"].Detail, "docker installed but not running: Cannot connect to the Docker daemon")
	assert.Contains(t, c["Container engine"].Detail, "podman not installed")
	assert.Contains(t, c["Container engine"].Fix, "sudo systemctl start docker")
	assert.Equal(t, Skip, c["kind cluster"].Status)
	assert.Equal(t, Warn, c["kubeconfig context"].Status)
	assert.Equal(t, Warn, c["Control-plane binaries"].Status)
	assert.Contains(t, c["Control-plane binaries"].Fix, "labctl controlplane build")
	out := e.stdout()
	assert.Contains(t, out, "CHECK")
	assert.Contains(t, out, "ready, with")
}

func TestFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("old Go", func(t *testing.T) {
		e := newEnv(t, false)
		e.r.OnOutput("go version", "go version go1.22.5 linux/amd64\n")
		c := byName(Run(ctx, e.o))["Go"]
		assert.Equal(t, Fail, c.Status)
		assert.Equal(t, "1.22.5 (student projects need 1.24+)", c.Detail)
		assert.Contains(t, c.Fix, "https://go.dev/dl")
		require.False(t, e.report(ctx))
		assert.Contains(t, e.stdout(), "Go\tfail\t1.22.5")
	})
	t.Run("no Go", func(t *testing.T) {
		e := newEnv(t, false)
		e.o.Runner = enginetest.NewRunner()
		c := byName(Run(ctx, e.o))["Go"]
		assert.Equal(t, Fail, c.Status)
		assert.Equal(t, "go is not on PATH", c.Detail)
	})
	t.Run("--engine that does not run", func(t *testing.T) {
		e := newEnv(t, false)
		e.r.DaemonDown("podman").Running("docker", "27")
		e.o.Engine = "podman"
		c := byName(Run(ctx, e.o))["Container engine"]
		assert.Equal(t, Fail, c.Status)
		assert.Contains(t, c.Detail, "podman is installed but not running")
		assert.Contains(t, c.Detail, "(chosen by --engine)")
	})
	t.Run("course cluster stopped", func(t *testing.T) {
		e := newEnv(t, false)
		e.r.Running("docker", "27")
		e.kind.st, e.kind.err = &cluster.Health{Running: false, Components: []cluster.Component{{Name: "k8s-operators-course-control-plane", Detail: "container stopped"}}}, nil
		c := byName(Run(ctx, e.o))["kind cluster"]
		assert.Equal(t, Fail, c.Status)
		assert.Contains(t, c.Detail, "container stopped")
		assert.Contains(t, c.Fix, "labctl up --provider kind --name k8s-operators-course")
	})
	t.Run("course context unreachable", func(t *testing.T) {
		e := newEnv(t, false)
		e.o.Kubeconfig = kubeconfig(t, "kind-k8s-operators-course", map[string]string{"kind-k8s-operators-course": "https://127.0.0.1:1"})
		c := byName(Run(ctx, e.o))["kubeconfig context"]
		assert.Equal(t, Fail, c.Status)
		assert.Contains(t, c.Detail, "kind-k8s-operators-course does not answer")
		// Someone else's context being down is only a warning.
		e.o.Kubeconfig = kubeconfig(t, "work", map[string]string{"work": "https://127.0.0.1:1"})
		assert.Equal(t, Warn, byName(Run(ctx, e.o))["kubeconfig context"].Status)
	})
	t.Run("low disk", func(t *testing.T) {
		e := newEnv(t, false)
		e.free = 5 << 30
		c := byName(Run(ctx, e.o))["Disk space"]
		assert.Equal(t, Warn, c.Status)
		assert.Contains(t, c.Detail, "5.0 GB free")
		assert.Contains(t, c.Detail, "needs about 6 GB")
		e.free = 200 << 20
		assert.Equal(t, Fail, byName(Run(ctx, e.o))["Disk space"].Status)
	})
	t.Run("port taken by another program", func(t *testing.T) {
		e := newEnv(t, false)
		e.inUse[80] = true
		c := byName(Run(ctx, e.o))
		assert.Equal(t, Warn, c["Port 80"].Status)
		assert.Contains(t, c["Port 80"].Fix, "ss -ltnp")
		assert.Equal(t, Pass, c["Port 443"].Status)
	})
}

func TestRealDisk(t *testing.T) {
	free, err := freeBytes(t.TempDir())
	require.NoError(t, err)
	assert.Greater(t, free, uint64(0))
}

// Without writable cgroups grading still works, boxes limited per
// process only: a warning that says so, never a failure.
func TestSandboxWithoutCgroupsWarns(t *testing.T) {
	c := checkSandbox(&Options{Sandbox: func() sandbox.Support {
		return sandbox.Support{OK: true, Overlay: true, Cgroups: cgroup.Support{Reason: "the cgroup v1 trees are not writable"}}
	}})
	assert.Equal(t, Warn, c.Status)
	assert.Contains(t, c.Detail, "per-process limits only: the cgroup v1 trees are not writable")
	c = checkSandbox(&Options{Sandbox: func() sandbox.Support {
		return sandbox.Support{OK: true, Overlay: true, Cgroups: cgroup.Support{Version: 1, Controllers: []string{"pids", "memory", "cpu"}}}
	}})
	assert.Equal(t, Pass, c.Status)
	assert.Contains(t, c.Detail, "cgroup v1 (pids, memory, cpu)")
}
