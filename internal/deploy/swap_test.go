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
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/testproject"
	"github.com/labctl/labctl/internal/userr"
)

func swapProject(t *testing.T, main string) *deploy.Project {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	require.NoError(t, testproject.Write(dir, "tiny", main))
	p, err := deploy.LoadProject(dir)
	require.NoError(t, err)
	return p
}

// supervisors returns the running supervisors of the tiny project's
// managers, by directory.
func supervisors(t *testing.T) map[string]proc.Record {
	t.Helper()
	out := map[string]proc.Record{}
	dirs, _ := filepath.Glob(filepath.Join(env.Env.StateDir, "operators", "tiny*"))
	for _, dir := range dirs {
		for _, r := range proc.LoadRecords(filepath.Join(dir, proc.SupervisorRecord)) {
			if r.Alive() {
				out[dir] = r
			}
		}
	}
	return out
}

// A redeploy whose manager hangs (never ready) is stopped at the ready
// timeout, and the operator deployed before keeps running: the new
// manager starts beside the old one and replaces it only once ready. A
// redeploy that works then replaces the old one: one manager, never two.
func TestRedeployStartsTheNewManagerThenSwaps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		for _, r := range supervisors(t) {
			_ = proc.StopRecord(context.Background(), r, 10*time.Second)
		}
	})
	s, _, _ := iostreams.Test(false)
	opts := deploy.LocalOptions{Streams: s, TiedToParent: true, ReadyTimeout: 20 * time.Second}

	_, err := deploy.RunLocal(ctx, env.Cluster, swapProject(t, testproject.Ready), opts)
	require.NoError(t, err)
	first := supervisors(t)
	require.Len(t, first, 1)

	start := time.Now()
	_, err = deploy.RunLocal(ctx, env.Cluster, swapProject(t, testproject.Hangs), opts)
	require.Error(t, err)
	assert.Less(t, time.Since(start), time.Minute, "the hung manager is given up on at the ready timeout")
	assert.Equal(t, userr.ExitFailure, userr.Code(err))
	msg := userr.Message(err)
	assert.Regexp(t, `^the manager did not become ready: no ready answer on http://127\.0\.0\.1:\d+/readyz within 20s; its log says: INFO setup waiting for something that never comes \(the operator deployed before keeps running\): see .*/tiny\.next/manager\.log`, msg)
	assert.Equal(t, first, supervisors(t), "the hung manager is stopped; the working one was never touched")
	current, err := deploy.CurrentLocal(env.Cluster, "", "")
	require.NoError(t, err)
	assert.Equal(t, "tiny", current.ProjectName)

	_, err = deploy.RunLocal(ctx, env.Cluster, swapProject(t, testproject.Ready), opts)
	require.NoError(t, err)
	now := supervisors(t)
	require.Len(t, now, 1, "the old manager went once the new one was ready")
	for dir := range first {
		assert.NotContains(t, now, dir, "the new manager runs in the other slot")
		assert.NoDirExists(t, dir, "the replaced manager's directory is removed")
	}
	for _, r := range first {
		assert.False(t, r.Alive(), "the replaced manager's supervisor is stopped")
	}
}

// A redeploy deletes what the project's previous deploy applied and its
// config/ no longer has, as `kubectl apply --prune` would: a
// ClusterRoleBinding taken out stops granting. Namespaces (and CRDs) stay.
func TestRedeployDeletesWhatTheProjectNoLongerHas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "pruned")
	require.NoError(t, testproject.Write(dir, "pruned", testproject.Ready))
	const binding = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: pruned-metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pruned-metrics-reader}
subjects: [{kind: ServiceAccount, name: pruned-controller-manager, namespace: pruned-system}]
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config", "default", "binding.yaml"), []byte(binding), 0o644))
	// A binding whose roleRef the second deploy changes: roleRef is
	// immutable, so the binding is replaced.
	rebound := filepath.Join(dir, "config", "default", "rebound.yaml")
	require.NoError(t, os.WriteFile(rebound, []byte(strings.ReplaceAll(binding, "pruned-metrics-reader", "pruned-rebound")), 0o644))
	kustomization := filepath.Join(dir, "config", "default", "kustomization.yaml")
	require.NoError(t, os.WriteFile(kustomization, []byte("resources:\n- manager.yaml\n- binding.yaml\n- rebound.yaml\n"), 0o644))
	s, _, errOut := iostreams.Test(false)
	opts := deploy.LocalOptions{Streams: s, TiedToParent: true, ReadyTimeout: time.Minute}
	deployed := func() {
		t.Helper()
		p, err := deploy.LoadProject(dir)
		require.NoError(t, err)
		_, err = deploy.RunLocal(ctx, env.Cluster, p, opts)
		require.NoError(t, err, errOut.String())
	}
	t.Cleanup(func() {
		for _, r := range proc.LoadRecords(filepath.Join(env.Env.StateDir, "operators", "pruned*", proc.SupervisorRecord)) {
			_ = proc.StopRecord(context.Background(), r, 10*time.Second)
		}
	})

	deployed()
	crb := &rbacv1.ClusterRoleBinding{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "pruned-metrics-reader"}, crb))

	require.NoError(t, os.WriteFile(kustomization, []byte("resources:\n- manager.yaml\n- rebound.yaml\n"), 0o644))
	require.NoError(t, os.WriteFile(rebound, []byte(strings.Replace(strings.ReplaceAll(binding, "pruned-metrics-reader", "pruned-rebound"),
		"kind: ClusterRole, name: pruned-rebound", "kind: ClusterRole, name: view", 1)), 0o644))
	deployed()
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "pruned-rebound"}, crb))
	assert.Equal(t, "view", crb.RoleRef.Name, "a binding whose roleRef changed is replaced")
	err := env.Client.Get(ctx, client.ObjectKey{Name: "pruned-metrics-reader"}, crb)
	assert.True(t, apierrors.IsNotFound(err), "the binding taken out of config/ is deleted: %v", err)
	assert.Contains(t, errOut.String(), "Deleted ClusterRoleBinding pruned-metrics-reader: the project no longer has it.")
	assert.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "pruned-system"}, &corev1.Namespace{}), "namespaces are never pruned")

	// A deploy that changes nothing deletes nothing.
	errOut.Reset()
	deployed()
	assert.NotContains(t, errOut.String(), "Deleted ")
}
