package reset

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/local"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/testcluster"
	"github.com/labctl/labctl/internal/userr"
)

var env *testcluster.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // tests needing the cluster skip themselves
	}
	testcluster.Main(m, &env)
}

func needCluster(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("needs the local cluster (not in -short)")
	}
}

// options returns reset options for the shared test cluster.
func options(t *testing.T, args ...string) (*Options, *iostreams.IOStreams, func() string) {
	t.Helper()
	s, out, errOut := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cmdutil.Providers{ByName: map[string]cluster.Provider{local.ProviderName: env.Provider}}}
	var got *Options
	cmd := NewCommand(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs(append([]string{"--name", env.Name, "--provider", "local"}, args...))
	require.NoError(t, cmd.Execute())
	return got, s, func() string { return out.String() + errOut.String() }
}

func TestResetMissingCluster(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	empty := &local.Provider{StateRoot: t.TempDir()}
	f := &cmdutil.Factory{IOStreams: s, Providers: &cmdutil.Providers{ByName: map[string]cluster.Provider{local.ProviderName: empty}}}
	for _, provider := range []string{"auto", "local"} {
		err := Run(context.Background(), &Options{f: f, Provider: provider, Name: "nope", Namespace: "default"})
		require.Error(t, err, provider)
		msg := userr.Message(err)
		assert.NotContains(t, msg, "\n")
		assert.Contains(t, msg, `"nope"`)
		assert.Contains(t, msg, "labctl up")
		assert.Equal(t, userr.ExitFailure, userr.Code(err))
	}
}

func TestFlags(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cmdutil.Providers{}}
	var got *Options
	cmd := NewCommand(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{})
	require.NoError(t, cmd.Execute())
	assert.Equal(t, "default", got.Namespace)
	assert.Equal(t, cluster.DefaultName, got.Name)
	assert.False(t, got.AllNamespaces || got.Force || got.Operator || got.Cluster)

	cmd = NewCommand(f, func(context.Context, *Options) error { return nil })
	cmd.SetArgs([]string{"--cluster", "--force"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	assert.Error(t, cmd.Execute(), "--cluster with --force makes no sense")
}

func TestPlural(t *testing.T) {
	assert.Equal(t, "2 Databases", plural(2, "Database"))
	assert.Equal(t, "1 Backup", plural(1, "Backup"))
	assert.Equal(t, "3 Namespaces", plural(3, "Namespace"))
	assert.Equal(t, "0 dependent objects", plural(0, "dependent object"))
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func objects(t *testing.T, yaml string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := deploy.DecodeYAML([]byte(yaml))
	require.NoError(t, err)
	return objs
}

func create(t *testing.T, yaml string) []*unstructured.Unstructured {
	t.Helper()
	objs := objects(t, yaml)
	for _, o := range objs {
		require.NoError(t, env.Client.Create(context.Background(), o), o.GetName())
	}
	return objs
}

func namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	ns.SetLabels(labels)
	require.NoError(t, env.Client.Create(context.Background(), ns))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
}

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

// This test must run before the CRDs are installed (tests run in source
// order): reset tolerates a cluster without the lab's APIs.
func TestResetWithoutCRDs(t *testing.T) {
	needCluster(t)
	ns := "labctl-lab-3-4-" + suffix()
	namespace(t, ns, map[string]string{ManagedByLabel: ManagedByValue})
	o, _, out := options(t)
	require.NoError(t, Run(context.Background(), o), out())
	assert.Contains(t, out(), "deleted 1 Namespace")
	assert.False(t, exists(t, "v1", "Namespace", "", ns))

	o, _, out = options(t)
	require.NoError(t, Run(context.Background(), o), out())
	assert.Contains(t, out(), "nothing of the labs to delete")
	assert.Contains(t, out(), "the lab's CRDs are not installed")
}

func installCRDs(t *testing.T) {
	t.Helper()
	a, err := deploy.NewApplier(env.Config)
	require.NoError(t, err)
	files, err := filepath.Glob("../../../operator/config/crd/bases/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		objs, err := deploy.DecodeYAML(raw)
		require.NoError(t, err)
		_, err = a.Apply(context.Background(), objs)
		require.NoError(t, err)
	}
}

// database creates a Database with the children the course's controller
// gives it (StatefulSet, Service, Secret owned by it; a data PVC that is
// not), and returns it.
func database(t *testing.T, ns, name string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	db := create(t, `
apiVersion: database.example.com/v1
kind: Database
metadata: {name: `+name+`, namespace: `+ns+`}
spec: {image: "postgres:14", replicas: 1, databaseName: mydb, username: admin, storage: {size: 1Gi}}
`)[0]
	if len(finalizers) > 0 {
		db.SetFinalizers(finalizers)
		require.NoError(t, env.Client.Update(context.Background(), db))
	}
	owner := metav1.OwnerReference{APIVersion: "database.example.com/v1", Kind: "Database", Name: name, UID: db.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	children := objects(t, `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: `+name+`, namespace: `+ns+`}
spec:
  serviceName: `+name+`
  replicas: 1
  selector: {matchLabels: {app: database, database: `+name+`}}
  template:
    metadata: {labels: {app: database, database: `+name+`}}
    spec: {containers: [{name: postgres, image: "postgres:14"}]}
---
apiVersion: v1
kind: Service
metadata: {name: `+name+`, namespace: `+ns+`}
spec: {selector: {app: database, database: `+name+`}, ports: [{name: postgres, port: 5432}]}
---
apiVersion: v1
kind: Secret
metadata: {name: `+name+`-credentials, namespace: `+ns+`}
stringData: {username: admin, password: secret, database: mydb}
`)
	for _, c := range children {
		c.SetOwnerReferences([]metav1.OwnerReference{owner})
		require.NoError(t, env.Client.Create(context.Background(), c))
	}
	create(t, `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-`+name+`-0, namespace: `+ns+`, labels: {app: database, database: `+name+`}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`)
	return db
}

// On a fresh cluster this takes ~40s: the garbage collector learns of the
// just-installed Database kind only at its next discovery resync (30s).
func TestResetDeletesTheLabsObjects(t *testing.T) {
	needCluster(t)
	installCRDs(t)
	ctx := context.Background()
	sfx := suffix()
	work := "work-" + sfx // plays the role of "default"
	other := "other-" + sfx
	labNS := "labctl-lab-8-2-" + sfx
	foreign := "labctl-foreign-" + sfx
	namespace(t, work, nil)
	namespace(t, other, nil)
	namespace(t, labNS, map[string]string{ManagedByLabel: ManagedByValue})
	namespace(t, foreign, nil)

	database(t, work, "db1")
	create(t, `
apiVersion: database.example.com/v1
kind: Backup
metadata: {name: b1, namespace: `+work+`}
spec: {databaseRef: {name: db1}}
`)
	database(t, other, "db2")
	database(t, labNS, "db3")
	// Not the labs' (or not recognisably): kept without --force.
	create(t, `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: orphan, namespace: `+work+`}
spec:
  serviceName: orphan
  selector: {matchLabels: {app: database, database: orphan}}
  template:
    metadata: {labels: {app: database, database: orphan}}
    spec: {containers: [{name: postgres, image: "postgres:14"}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: keep-me, namespace: `+work+`}
data: {a: b}
`)

	// Default scope: the namespace only (plus labctl's namespaces).
	o, _, out := options(t, "-n", work)
	require.NoError(t, Run(ctx, o), out())
	for _, gone := range [][4]string{
		{"database.example.com/v1", "Database", work, "db1"},
		{"database.example.com/v1", "Backup", work, "b1"},
		{"apps/v1", "StatefulSet", work, "db1"},
		{"v1", "Service", work, "db1"},
		{"v1", "Secret", work, "db1-credentials"},
		{"v1", "PersistentVolumeClaim", work, "data-db1-0"},
		{"v1", "Namespace", "", labNS},
	} {
		assert.False(t, exists(t, gone[0], gone[1], gone[2], gone[3]), "%v should be gone", gone)
	}
	for _, kept := range [][4]string{
		{"database.example.com/v1", "Database", other, "db2"},
		{"v1", "Secret", other, "db2-credentials"},
		{"apps/v1", "StatefulSet", work, "orphan"},
		{"v1", "ConfigMap", work, "keep-me"},
		{"v1", "Namespace", "", foreign},
	} {
		assert.True(t, exists(t, kept[0], kept[1], kept[2], kept[3]), "%v should be kept", kept)
	}
	text := out()
	assert.Contains(t, text, "deleted 1 Backup, 1 Database, 1 PersistentVolumeClaim, 1 Namespace; garbage collection removed 3 dependent objects")
	assert.Contains(t, text, "kept StatefulSet "+work+"/orphan: labctl did not create it (--force deletes it)")
	assert.Contains(t, text, "kept Namespace "+foreign)

	// --all-namespaces reaches db2.
	o, _, out = options(t, "--all-namespaces")
	require.NoError(t, Run(ctx, o), out())
	assert.False(t, exists(t, "database.example.com/v1", "Database", other, "db2"))
	assert.False(t, exists(t, "v1", "Secret", other, "db2-credentials"))
	assert.True(t, exists(t, "v1", "Namespace", "", foreign), "still not recognised")

	// --force takes what labctl does not recognise, never other objects.
	o, _, out = options(t, "-n", work, "--force")
	require.NoError(t, Run(ctx, o), out())
	assert.False(t, exists(t, "apps/v1", "StatefulSet", work, "orphan"))
	assert.False(t, exists(t, "v1", "Namespace", "", foreign))
	assert.True(t, exists(t, "v1", "ConfigMap", work, "keep-me"))
	assert.True(t, exists(t, "v1", "Namespace", "", work))
}

func TestResetStuckFinalizer(t *testing.T) {
	needCluster(t)
	installCRDs(t)
	ctx := context.Background()
	ns := "stuck-" + suffix()
	namespace(t, ns, nil)
	database(t, ns, "db4", "database.example.com/finalizer")

	// No operator runs to remove the finalizer: a clear error.
	o, _, out := options(t, "-n", ns, "--timeout", "3s")
	err := Run(ctx, o)
	require.Error(t, err, out())
	msg := userr.Message(err)
	assert.NotContains(t, msg, "\n")
	assert.Contains(t, msg, "Database "+ns+"/db4 is still being deleted after 3s: finalizer database.example.com/finalizer was not removed")
	assert.Contains(t, msg, "labctl reset --force")

	// --force removes it after a short grace.
	old := forceGrace
	forceGrace = 2 * time.Second
	t.Cleanup(func() { forceGrace = old })
	o, _, out = options(t, "-n", ns, "--force")
	require.NoError(t, Run(ctx, o), out())
	assert.Contains(t, out(), "removed finalizers database.example.com/finalizer from Database "+ns+"/db4")
	assert.False(t, exists(t, "database.example.com/v1", "Database", ns, "db4"))
	assert.False(t, exists(t, "apps/v1", "StatefulSet", ns, "db4"), "garbage-collected once the owner is gone")
}

func TestResetOperator(t *testing.T) {
	needCluster(t)
	o, _, out := options(t, "-n", "default", "--operator", "--project", "/src/op")
	var gotDir string
	var gotCluster *cluster.Cluster
	o.f.DeployOperator = func(_ context.Context, c *cluster.Cluster, dir string) error {
		gotCluster, gotDir = c, dir
		return nil
	}
	require.NoError(t, Run(context.Background(), o), out())
	assert.Equal(t, "/src/op", gotDir)
	require.NotNil(t, gotCluster)
	assert.Equal(t, env.Name, gotCluster.Name)
	assert.Contains(t, out(), "operator redeployed")

	o.f.DeployOperator = func(context.Context, *cluster.Cluster, string) error {
		return userr.New("build failed", "fix it")
	}
	err := Run(context.Background(), o)
	assert.EqualError(t, err, "build failed: fix it")
}

// recordingProvider answers Get with a cluster and records Down and Up.
type recordingProvider struct {
	calls []string
	down  error
}

func (p *recordingProvider) Name() string { return "kind" }
func (p *recordingProvider) Up(_ context.Context, o cluster.UpOptions) (*cluster.Cluster, error) {
	p.calls = append(p.calls, "up "+o.Name)
	return &cluster.Cluster{Name: o.Name, Provider: "kind", Context: "kind-" + o.Name}, nil
}
func (p *recordingProvider) Get(_ context.Context, name string) (*cluster.Cluster, error) {
	if name != "course" {
		return nil, cluster.ErrNotFound
	}
	return &cluster.Cluster{Name: name, Provider: "kind"}, nil
}
func (p *recordingProvider) Down(_ context.Context, name string) error {
	p.calls = append(p.calls, "down "+name)
	return p.down
}
func (p *recordingProvider) Status(context.Context, string) (*cluster.Status, error) {
	return nil, cluster.ErrNotFound
}

func TestResetCluster(t *testing.T) {
	s, out, _ := iostreams.Test(false)
	prov := &recordingProvider{}
	f := &cmdutil.Factory{IOStreams: s, Providers: &cmdutil.Providers{ByName: map[string]cluster.Provider{"kind": prov}}}
	var deployed *cluster.Cluster
	f.DeployOperator = func(_ context.Context, c *cluster.Cluster, _ string) error { deployed = c; return nil }
	require.NoError(t, Run(context.Background(), &Options{f: f, Provider: "kind", Name: "course", Cluster: true}))
	assert.Equal(t, []string{"down course", "up course"}, prov.calls)
	require.NotNil(t, deployed)
	assert.Equal(t, "kind-course", deployed.Context)
	assert.Contains(t, out.String(), "kind cluster course recreated")

	prov.calls, prov.down = nil, userr.Usage("labctl does not delete clusters it did not create", "…")
	err := Run(context.Background(), &Options{f: f, Provider: "kind", Name: "course", Cluster: true})
	require.Error(t, err)
	assert.Equal(t, []string{"down course"}, prov.calls, "not recreated when deletion fails")

	err = Run(context.Background(), &Options{f: f, Provider: "kind", Name: "missing", Cluster: true})
	require.Error(t, err)
	assert.True(t, errors.Is(err, cluster.ErrNotFound))
	assert.Contains(t, userr.Message(err), `there is no running cluster named "missing" to reset`)
}
