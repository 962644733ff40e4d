package checks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/report"
)

func TestRequeueAfter(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "hello-world-operator", "internal", "controller", "helloworld_controller.go"))
	require.NoError(t, err)
	write := func(t *testing.T, code string) *Context {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "internal", "controller"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "internal", "controller", "c.go"), []byte(code), 0o644))
		return projectContext(dir)
	}
	const with = `{"reconciler":"HelloWorldReconciler"}`

	out := runCheck(t, write(t, string(src)), "requeue-after", with)
	assert.Equal(t, report.Pass, out.Status, out.Message)
	assert.Contains(t, out.Message, "(*HelloWorldReconciler).Reconcile")

	immediate := strings.ReplaceAll(string(src), "ctrl.Result{RequeueAfter: configMapRecheck}", "ctrl.Result{Requeue: true}")
	immediate = strings.ReplaceAll(immediate, "ctrl.Result{RequeueAfter: time.Second}", "ctrl.Result{Requeue: true}")
	out = runCheck(t, write(t, immediate), "requeue-after", with)
	assert.Equal(t, report.Fail, out.Status)
	assert.Contains(t, out.Observed, "only Requeue: true")

	// Set in a helper Reconcile calls, by assignment: still on its way.
	helper := strings.ReplaceAll(immediate, "return ctrl.Result{Requeue: true}, nil", "return r.later(), nil") + `
func (r *HelloWorldReconciler) later() ctrl.Result {
	var res ctrl.Result
	res.RequeueAfter = configMapRecheck
	return res
}`
	out = runCheck(t, write(t, helper), "requeue-after", with)
	assert.Equal(t, report.Pass, out.Status, out.Message)
	assert.Contains(t, out.Message, "later")

	// Declared but never reached from Reconcile.
	unused := immediate + `
func (r *HelloWorldReconciler) unused() ctrl.Result { return ctrl.Result{RequeueAfter: configMapRecheck} }`
	assert.Equal(t, report.Fail, runCheck(t, write(t, unused), "requeue-after", with).Status)

	out = runCheck(t, write(t, string(src)), "requeue-after", `{"reconciler":"DatabaseReconciler"}`)
	assert.Equal(t, report.Fail, out.Status)
	assert.Contains(t, out.Message, "no Reconcile method of DatabaseReconciler")
	assert.Equal(t, report.Skipped, runCheck(t, projectContext(""), "requeue-after", with).Status)
}

// The delay is judged by its value: a unit forgotten (10 nanoseconds) is a
// busy loop, however it is spelt; a computed delay it cannot know passes.
func TestRequeueAfterDuration(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "hello-world-operator", "internal", "controller", "helloworld_controller.go"))
	require.NoError(t, err)
	write := func(t *testing.T, code string) *Context {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "internal", "controller"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "internal", "controller", "c.go"), []byte(code), 0o644))
		return projectContext(dir)
	}
	const with = `{"reconciler":"HelloWorldReconciler"}`
	const decl = "const configMapRecheck = 10 * time.Second"
	require.Contains(t, string(src), decl)
	for _, tc := range []struct {
		def  string
		pass bool
	}{
		{"const configMapRecheck = 10", false},
		{"const configMapRecheck = time.Duration(10)", false},
		{"const configMapRecheck time.Duration = 30", false},
		{"const configMapRecheck = 5 * time.Millisecond", false},
		{"const configMapRecheck = (1 * time.Minute) / 2", true},
		{"const configMapRecheck = 1500 * time.Millisecond", true},
		{"var configMapRecheck = time.Duration(recheckSeconds()) * time.Second\nfunc recheckSeconds() int { return 10 }", true},
	} {
		out := runCheck(t, write(t, strings.Replace(string(src), decl, tc.def, 1)), "requeue-after", with)
		if tc.pass {
			assert.Equal(t, report.Pass, out.Status, "%s: %s", tc.def, out.Message)
			continue
		}
		assert.Equal(t, report.Fail, out.Status, "%s: %s", tc.def, out.Message)
		assert.Contains(t, out.Message, "busy loop", tc.def)
		assert.Contains(t, out.Observed, "RequeueAfter: configMapRecheck = ", tc.def)
	}
}
