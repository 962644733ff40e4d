package testmutant

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/reference"
)

const controllerSource = `package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	cu "sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type DatabaseReconciler struct {
	client.Client
}

type counter struct{}

func (counter) Create(a, b int) {}

func (r *DatabaseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &corev1.Secret{}
	if err := r.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	_ = r.Status().Update(ctx, s)
	_, _ = cu.CreateOrUpdate(ctx, r.Client, s, nil)
	counter{}.Create(1)
	return ctrl.Result{}, ensure(ctx, r.Client, s)
}

func ensure(ctx context.Context, c client.Client, s *corev1.Secret) error {
	return c.Create(ctx, s)
}
`

// Every client write (through the reconciler, its Status(), a helper's
// client, controllerutil) goes through a wrapper; a call with another
// shape (one argument) is left alone; the reconciler's Reconcile is
// renamed for the wrapper; the test files are not touched.
func TestInstrumentWrapsClientCallsWhateverTheirShape(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "database_controller.go"), []byte(controllerSource), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "database_controller_test.go"), []byte("package controller\n"), 0o644))
	in, err := Instrument(dir, "DatabaseReconciler")
	require.NoError(t, err)
	assert.True(t, in.Reconcile)
	assert.Equal(t, 4, in.Writes)
	src := string(in.Files[filepath.Join(dir, "database_controller.go")])
	for _, want := range []string{
		"labctlMutGet(r, ctx, req.NamespacedName, s)",
		"labctlMutStatusUpdate(r.Status(), ctx, s)",
		"labctlMutCreateOrUpdate(ctx, r.Client, s, nil)",
		"labctlMutCreate(c, ctx, s)",
		"counter{}.Create(1)",
		"func (r *DatabaseReconciler) labctlMutOriginalReconcile(",
	} {
		assert.Contains(t, src, want)
	}
	assert.NotContains(t, in.Files, filepath.Join(dir, "database_controller_test.go"))
	gen := string(in.Files[filepath.Join(dir, GeneratedFile)])
	assert.Contains(t, gen, "package controller")
	assert.Contains(t, gen, "func (r *DatabaseReconciler) Reconcile(")

	// Another reconciler's name: its Reconcile is not wrapped.
	other, err := Instrument(dir, "BackupReconciler")
	require.NoError(t, err)
	assert.False(t, other.Reconcile)
	assert.NotContains(t, string(other.Files[filepath.Join(dir, GeneratedFile)]), "Reconcile(")

	ov := t.TempDir()
	desc, err := in.WriteOverlay(ov)
	require.NoError(t, err)
	raw, err := os.ReadFile(desc)
	require.NoError(t, err)
	var o struct{ Replace map[string]string }
	require.NoError(t, json.Unmarshal(raw, &o))
	assert.Len(t, o.Replace, 2)
	for orig, repl := range o.Replace {
		got, err := os.ReadFile(repl)
		require.NoError(t, err)
		assert.Equal(t, string(in.Files[orig]), string(got))
	}
}

// The instrumented reference operator compiles (go vet, through the
// overlay): the wrappers fit a real kubebuilder project.
func TestInstrumentedReferenceCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the reference operator")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir, err := reference.Dir(t.TempDir())
	require.NoError(t, err)
	in, err := Instrument(filepath.Join(dir, "internal", "controller"), "DatabaseReconciler")
	require.NoError(t, err)
	assert.True(t, in.Reconcile)
	assert.Greater(t, in.Writes, 10)
	desc, err := in.WriteOverlay(t.TempDir())
	require.NoError(t, err)
	cmd := exec.Command(goBin, "vet", "-overlay="+desc, "./internal/controller/")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
}

// A file of the package that is a symbolic link (to a file only the
// grader may read) is not read, and a linked package is refused.
func TestInstrumentDoesNotFollowSymbolicLinks(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret.go")
	require.NoError(t, os.WriteFile(secret, []byte("GraderSecret\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "database_controller.go"), []byte(controllerSource), 0o644))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "leak.go")))
	in, err := Instrument(dir, "DatabaseReconciler")
	require.NoError(t, err)
	for _, content := range in.Files {
		assert.NotContains(t, string(content), "GraderSecret")
	}
	linked := filepath.Join(t.TempDir(), "controller")
	require.NoError(t, os.Symlink(dir, linked))
	_, err = Instrument(linked, "DatabaseReconciler")
	assert.Error(t, err)
}

// A run's mutant is named by a token of this instrumentation's, never by
// the mutant's name; a run with no mutant gets a token too, fresh each
// time, that no mutant has: the environment does not tell the runs apart.
func TestMutantsAreChosenByRandomTokens(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "database_controller.go"), []byte(controllerSource), 0o644))
	in, err := Instrument(dir, "DatabaseReconciler")
	require.NoError(t, err)
	src := string(in.Files[filepath.Join(dir, GeneratedFile)])
	token := func(entry string) string {
		v, ok := strings.CutPrefix(entry, EnvVar+"=")
		require.True(t, ok, entry)
		require.Len(t, v, 32)
		return v
	}
	for _, m := range Catalogue {
		assert.Contains(t, src, fmt.Sprintf("%q: %q,", token(in.Env(m.Name)), m.Name))
		assert.NotEqual(t, m.Name, token(in.Env(m.Name)))
	}
	off, again := token(in.Env("")), token(OffEnv())
	assert.NotEqual(t, off, again)
	assert.NotContains(t, src, off)
	assert.NotContains(t, src, again)

	other, err := Instrument(dir, "DatabaseReconciler")
	require.NoError(t, err)
	assert.NotEqual(t, in.Env("no-secret"), other.Env("no-secret"), "each instrumentation has tokens of its own")
}
