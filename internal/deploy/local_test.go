package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/testcluster"
	"github.com/labctl/labctl/internal/userr"
)

var env *testcluster.Cluster

func TestMain(m *testing.M) { testcluster.Main(m, &env) }

var databases = schema.GroupVersionResource{Group: "database.example.com", Version: "v1", Resource: "databases"}

func runReference(t *testing.T) *operator.Operator {
	t.Helper()
	p, err := deploy.ResolveProject("")
	require.NoError(t, err)
	s, _, errOut := iostreams.Test(false)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	op, err := deploy.RunLocal(ctx, env.Cluster, p, deploy.LocalOptions{Streams: s, TiedToParent: true})
	require.NoError(t, err, errOut.String())
	return op
}

// The reference operator, run as a local process under its own identity,
// reconciles a Database to Ready on the simulated node.
func TestReferenceOperatorMakesADatabaseReady(t *testing.T) {
	op := runReference(t)
	assert.Equal(t, "system:serviceaccount:postgres-operator-system:postgres-operator-controller-manager", op.Identity)

	ns := env.Namespace(t)
	db, err := kube.DecodeYAML([]byte(`
apiVersion: database.example.com/v1
kind: Database
metadata: {name: my-database, namespace: ` + ns + `}
spec: {image: "postgres:14", replicas: 1, databaseName: mydb, username: admin, storage: {size: 1Gi}}
`))
	require.NoError(t, err)
	require.NoError(t, env.Client.Create(context.Background(), db[0]))
	last, err := kube.WaitFor(context.Background(), env.Config, databases, ns, "my-database", time.Minute, func(u *unstructured.Unstructured) (bool, error) {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase == "Ready", nil
	})
	require.NoError(t, err, "last seen: %v", last)

	// Its requests reach the API as the ServiceAccount (its own token): the
	// audit log says so.
	f, err := env.Env.AuditLog(context.Background())
	require.NoError(t, err)
	defer f.Close()
	raw, _ := readAll(f)
	assert.Contains(t, raw, `"user":{"username":"`+op.Identity+`"`)
	assert.NotContains(t, raw, `"impersonatedUser"`, "the manager authenticates with its token, it impersonates no one")

	n, err := op.Restarts(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n)
	logs, err := op.Logs(context.Background())
	require.NoError(t, err)
	assert.Contains(t, string(logs), "Starting workers")

	current, err := deploy.CurrentLocal(env.Cluster, "", "")
	require.NoError(t, err)
	assert.Equal(t, op.Identity, current.Identity)
}

// A manager that exits at start is reported with its log, and the
// supervisor's restarts stop with it.
func TestManagerThatExitsAtStartIsReported(t *testing.T) {
	p, err := deploy.ResolveProject("")
	require.NoError(t, err)
	broken := filepath.Join(t.TempDir(), "broken")
	require.NoError(t, os.CopyFS(broken, os.DirFS(p.Dir)))
	main := filepath.Join(broken, "cmd", "main.go")
	src, err := os.ReadFile(main)
	require.NoError(t, err)
	src = []byte(strings.Replace(string(src), "func main() {", "func main() {\n\tprintln(\"boom: exiting on purpose\")\n\tos.Exit(3)", 1))
	require.NoError(t, os.WriteFile(main, src, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "PROJECT"), []byte("projectName: broken-operator\n"), 0o644))

	bp, err := deploy.LoadProject(broken)
	require.NoError(t, err)
	s, _, errOut := iostreams.Test(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err = deploy.RunLocal(ctx, env.Cluster, bp, deploy.LocalOptions{Streams: s, TiedToParent: true})
	require.Error(t, err)
	msg := userr.Message(err)
	assert.Contains(t, msg, "the manager did not become ready: it exited during start-up")
	assert.Contains(t, msg, "boom: exiting on purpose")
	assert.NotContains(t, errOut.String(), "boom", "the log tail is printed only with -v")
	require.NoError(t, deploy.StopLocal(ctx, env.Cluster))
	procs, err := proc.Find(filepath.Join(env.Env.StateDir, "operators"))
	require.NoError(t, err)
	assert.Empty(t, procs)
}

func TestProjectThatDoesNotCompileIsOneLine(t *testing.T) {
	p, err := deploy.ResolveProject("")
	require.NoError(t, err)
	broken := filepath.Join(t.TempDir(), "nocompile")
	require.NoError(t, os.CopyFS(broken, os.DirFS(p.Dir)))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "cmd", "extra.go"), []byte("package main\n\nvar x int = \"no\"\n"), 0o644))
	bp, err := deploy.LoadProject(broken)
	require.NoError(t, err)
	s, _, _ := iostreams.Test(false)
	_, err = deploy.RunLocal(context.Background(), env.Cluster, bp, deploy.LocalOptions{Streams: s, TiedToParent: true})
	require.Error(t, err)
	msg := userr.Message(err)
	assert.Contains(t, msg, "does not build")
	assert.Contains(t, msg, "extra.go:3")
	assert.NotContains(t, msg, "\n")
}

func TestNotAProject(t *testing.T) {
	_, err := deploy.LoadProject(t.TempDir())
	require.Error(t, err)
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	assert.Contains(t, userr.Message(err), "is not a kubebuilder project")
}

// The course keeps one cluster across its modules, so the hello-world and
// the postgres operators may both run: the one judged is the lab's
// project's (or --project's), never whichever sorts first.
func TestCurrentLocalJudgesTheLabsOperator(t *testing.T) {
	pg := runReference(t)
	hp, err := deploy.ResolveProjectFor("", reference.Hello)
	require.NoError(t, err)
	s, _, errOut := iostreams.Test(false)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	hello, err := deploy.RunLocal(ctx, env.Cluster, hp, deploy.LocalOptions{Streams: s, TiedToParent: true})
	require.NoError(t, err, errOut.String())
	t.Cleanup(func() { _ = deploy.StopLocal(context.Background(), env.Cluster) })

	for _, c := range []struct{ name, dir, ref, want string }{
		{"a hello-world lab", "", reference.Hello, hello.Identity},
		{"a Database lab", "", reference.Postgres, pg.Identity},
		{"the default project", "", "", pg.Identity},
		{"--project wins over the lab's project", hp.Dir, reference.Postgres, hello.Identity},
	} {
		got, err := deploy.CurrentLocal(env.Cluster, c.dir, c.ref)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got.Identity, c.name)
	}
	got, err := deploy.CurrentLocal(env.Cluster, "", reference.Hello)
	require.NoError(t, err)
	assert.Equal(t, "hello-world-operator", got.ProjectName)
}
