// Package fixturelab proves that a lab is data: testdata/fixture-lab holds a
// lab written only as YAML and the tiny operator it checks, and this test
// verifies that lab on a real cluster and resets it, with no Go of its own
// anywhere in labctl.
package fixturelab

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/reset"
	"github.com/labctl/labctl/internal/testcluster"
)

const fixture = "../../testdata/fixture-lab"

var env *testcluster.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // the test needs the cluster and skips itself
	}
	// As verify does: the engine's controller-runtime client wants a
	// logger, the report is the test's output.
	ctrllog.SetLogger(logr.Discard())
	testcluster.Main(m, &env)
}

// lockedBuffer collects the operator's log while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// buildTimeout bounds the fixture operator's build (see startOperator).
const buildTimeout = 20 * time.Minute

// startOperator builds the fixture operator, installs its CRD and runs it
// against the test cluster until the test ends.
func startOperator(t *testing.T, ctx context.Context) *lockedBuffer {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "manager")
	// The build has a bound of its own: with a cold Go cache on two busy
	// cores, compiling controller-runtime alone can take most of the five
	// minutes the verify and the reset are given.
	buildCtx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	build := exec.CommandContext(buildCtx, "go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(fixture, "operator")
	// Its own module, outside any workspace of the caller's.
	build.Env = append(os.Environ(), "GOWORK=off")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the fixture operator: %s", out)

	raw, err := os.ReadFile(filepath.Join(fixture, "operator", "config", "crd.yaml"))
	require.NoError(t, err)
	objs, err := kube.DecodeYAML(raw)
	require.NoError(t, err)
	a, err := kube.NewApplier(env.Config)
	require.NoError(t, err)
	applyCtx, cancelApply := context.WithTimeout(ctx, time.Minute)
	defer cancelApply()
	_, err = a.Apply(applyCtx, objs)
	require.NoError(t, err)

	log := &lockedBuffer{}
	run := exec.Command(bin)
	run.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
	run.Stdout, run.Stderr = log, log
	require.NoError(t, run.Start())
	t.Cleanup(func() {
		_ = run.Process.Kill()
		_ = run.Wait()
		if t.Failed() {
			t.Logf("fixture operator log:\n%s", log.String())
		}
	})
	return log
}

func TestFixtureLabVerifiesAndResets(t *testing.T) {
	if env == nil {
		t.Skip("needs the local cluster (not in -short)")
	}
	all, err := labs.Load(os.DirFS(filepath.Join(fixture, "labs")))
	require.NoError(t, err)
	lab, err := labs.FindLab(all, "0.1")
	require.NoError(t, err)
	startOperator(t, context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Verify, keeping the run's namespace and objects as --keep does.
	ns := checks.NamespaceName(lab.ID)
	var mu sync.Mutex
	took := map[string]time.Duration{}
	onCheck := func(c *report.CheckResult) {
		mu.Lock()
		defer mu.Unlock()
		took[c.ID] = time.Duration(c.Duration)
	}
	rep, err := checks.Run(ctx, checks.Options{Lab: lab, Cluster: env.Cluster, Keep: true, Namespace: ns, OnCheck: onCheck})
	require.NoError(t, err)
	// stays-ready and configmap-stays (meanwhile) each watch for 2 s from
	// the group's shared start. Alongside, both end about 2 s in; one after
	// the other, the second would end a whole window (2 s) after the first.
	// Compared with each other, not with the clock, so a busy machine's
	// slower reads do not decide it.
	first, meanwhile := took["stays-ready"], took["configmap-stays"]
	assert.GreaterOrEqual(t, first, 2*time.Second)
	assert.GreaterOrEqual(t, meanwhile, 2*time.Second)
	assert.Less(t, meanwhile, first+2*time.Second, "the meanwhile window ran after the first one instead of alongside it")
	for _, task := range rep.Tasks {
		assert.Equal(t, "pass", string(task.Status), "task %s", task.ID)
	}
	require.True(t, rep.AllPassed())

	// The same Greeting outside labctl's namespaces, where reset deletes
	// it by kind and garbage collection takes its ConfigMap.
	work := env.Namespace(t)
	step := lab.Scenarios[0].Steps[0]
	require.NotNil(t, step.Apply)
	g := (&unstructured.Unstructured{Object: step.Apply.Object}).DeepCopy()
	g.SetNamespace(work)
	require.NoError(t, env.Client.Create(ctx, g))
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	_, err = kube.WaitFor(ctx, env.Config, configMaps, work, "hello-greeting", time.Minute, kube.Exists)
	require.NoError(t, err, "the operator gives the Greeting its ConfigMap")

	s, out, errOut := iostreams.Test(false)
	res, err := reset.Run(ctx, reset.Options{Config: env.Config, Labs: all, Namespace: work, Streams: s})
	require.NoError(t, err, out.String()+errOut.String())
	res.Print(s)
	assert.Contains(t, out.String(), "deleted 1 Greeting, 1 Namespace; garbage collection removed 1 dependent object")

	for _, gone := range [][4]string{
		{"fixture.labctl.dev/v1", "Greeting", work, "hello"},
		{"v1", "ConfigMap", work, "hello-greeting"},
		{"fixture.labctl.dev/v1", "Greeting", ns, "hello"},
		{"v1", "Namespace", "", ns},
	} {
		assert.False(t, exists(t, gone[0], gone[1], gone[2], gone[3]), "%v should be gone", gone)
	}
}

// exists reports whether an object is there and not being deleted.
func exists(t *testing.T, apiVersion, kind, ns, name string) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return u.GetDeletionTimestamp() == nil
}
