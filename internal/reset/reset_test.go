package reset

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/testcluster"
	"github.com/labctl/labctl/internal/userr"
	labsfs "github.com/labctl/labctl/labs"
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

// run resets the shared test cluster with the embedded labs, as `labctl
// reset` does, and returns its printed output.
func run(t *testing.T, o Options) (string, error) {
	t.Helper()
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	s, out, errOut := iostreams.Test(false)
	o.Config, o.Labs, o.Streams = env.Config, all, s
	res, err := Run(context.Background(), o)
	if err == nil {
		res.Print(s)
	}
	return out.String() + errOut.String(), err
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
	objs, err := kube.DecodeYAML([]byte(yaml))
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

func makeNamespace(t *testing.T, name string, labels map[string]string) {
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
	makeNamespace(t, ns, map[string]string{kube.ManagedByLabel: kube.ManagedByValue})
	out, err := run(t, Options{})
	require.NoError(t, err, out)
	assert.Contains(t, out, "deleted 1 Namespace")
	assert.False(t, exists(t, "v1", "Namespace", "", ns))

	out, err = run(t, Options{})
	require.NoError(t, err, out)
	assert.Contains(t, out, "nothing of the labs to delete")
	assert.Contains(t, out, "the lab's CRDs are not installed")
}

func installCRDs(t *testing.T) {
	t.Helper()
	a, err := kube.NewApplier(env.Config)
	require.NoError(t, err)
	files, err := filepath.Glob("../../operator/config/crd/bases/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		objs, err := kube.DecodeYAML(raw)
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
	sfx := suffix()
	work := "work-" + sfx // plays the role of "default"
	other := "other-" + sfx
	labNS := "labctl-lab-8-2-" + sfx
	foreign := "labctl-foreign-" + sfx
	makeNamespace(t, work, nil)
	makeNamespace(t, other, nil)
	makeNamespace(t, labNS, map[string]string{kube.ManagedByLabel: kube.ManagedByValue})
	makeNamespace(t, foreign, nil)

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
	out, err := run(t, Options{Namespace: work})
	require.NoError(t, err, out)
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
	text := out
	assert.Contains(t, text, "deleted 1 Backup, 1 Database, 1 PersistentVolumeClaim, 1 Namespace; garbage collection removed 3 dependent objects")
	assert.Contains(t, text, "kept StatefulSet "+work+"/orphan: labctl did not create it (--force deletes it)")
	assert.Contains(t, text, "kept Namespace "+foreign)

	// --all-namespaces reaches db2.
	out, err = run(t, Options{AllNamespaces: true})
	require.NoError(t, err, out)
	assert.False(t, exists(t, "database.example.com/v1", "Database", other, "db2"))
	assert.False(t, exists(t, "v1", "Secret", other, "db2-credentials"))
	assert.True(t, exists(t, "v1", "Namespace", "", foreign), "still not recognised")

	// --force takes what labctl does not recognise, never other objects.
	out, err = run(t, Options{Namespace: work, Force: true})
	require.NoError(t, err, out)
	assert.False(t, exists(t, "apps/v1", "StatefulSet", work, "orphan"))
	assert.False(t, exists(t, "v1", "Namespace", "", foreign))
	assert.True(t, exists(t, "v1", "ConfigMap", work, "keep-me"))
	assert.True(t, exists(t, "v1", "Namespace", "", work))
}

func TestResetStuckFinalizer(t *testing.T) {
	needCluster(t)
	installCRDs(t)
	ns := "stuck-" + suffix()
	makeNamespace(t, ns, nil)
	database(t, ns, "db4", "database.example.com/finalizer")

	// No operator runs to remove the finalizer: a clear error.
	out, err := run(t, Options{Namespace: ns, Timeout: 3 * time.Second})
	require.Error(t, err, out)
	msg := userr.Message(err)
	assert.NotContains(t, msg, "\n")
	assert.Contains(t, msg, "Database "+ns+"/db4 is still being deleted after 3s: finalizer database.example.com/finalizer was not removed")
	assert.Contains(t, msg, "labctl reset --force")

	// --force removes it after a short grace.
	out, err = run(t, Options{Namespace: ns, Force: true, ForceGrace: 2 * time.Second})
	require.NoError(t, err, out)
	assert.Contains(t, out, "removed finalizers database.example.com/finalizer from Database "+ns+"/db4")
	assert.False(t, exists(t, "database.example.com/v1", "Database", ns, "db4"))
	assert.False(t, exists(t, "apps/v1", "StatefulSet", ns, "db4"), "garbage-collected once the owner is gone")
}
