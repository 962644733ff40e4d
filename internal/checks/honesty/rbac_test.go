//go:build unix

package honesty_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/report"
)

// TestRBACCheckReviewsNonResourceURLs binds a ServiceAccount to a
// ClusterRole that may get /metrics, as lab 6.4's metrics-reader binding
// does, and reviews it with the rbac check: get is allowed, post is not,
// and another ServiceAccount may not get it.
func TestRBACCheckReviewsNonResourceURLs(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, sa := boundServiceAccount(ctx, t, "metrics-reader", rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}})

	step := func(id string, verbs ...string) labs.Step {
		return checkStep(t, id, "rbac", map[string]any{"nonResourceURL": "/metrics", "verbs": verbs})
	}
	review := func(account string) map[string]*report.CheckResult {
		op := &operator.Operator{Identity: operator.ServiceAccountUser(ns, account)}
		return runSteps(ctx, t, op, "", time.Second, step("may-get", "get"), step("may-post", "get", "post"))
	}
	got := review(sa)
	assert.Equal(t, report.Pass, got["may-get"].Status, got["may-get"].Message)
	assert.Contains(t, got["may-get"].Message, "may get /metrics")
	assert.Equal(t, report.Fail, got["may-post"].Status, got["may-post"].Message)
	assert.Contains(t, got["may-post"].Message, "may not post /metrics")
	got = review("default")
	assert.Equal(t, report.Fail, got["may-get"].Status, got["may-get"].Message)
}

// TestRBACCheckTakesAnyOfGroups: events may be created in the core group
// (record.EventRecorder) or in events.k8s.io (events.EventRecorder); with
// groups the check passes when either is granted, and says both when
// neither is.
func TestRBACCheckTakesAnyOfGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, sa := boundServiceAccount(ctx, t, "events", rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}})
	op := &operator.Operator{Identity: operator.ServiceAccountUser(ns, sa)}
	got := runSteps(ctx, t, op, "", time.Second,
		checkStep(t, "either-group", "rbac", map[string]any{"groups": []string{"", "events.k8s.io"}, "resource": "events", "verbs": []string{"create"}}),
		checkStep(t, "core-only", "rbac", map[string]any{"group": "", "resource": "events", "verbs": []string{"create"}}),
		checkStep(t, "neither", "rbac", map[string]any{"groups": []string{"", "events.k8s.io"}, "resource": "events", "verbs": []string{"delete"}}),
	)
	assert.Equal(t, report.Pass, got["either-group"].Status, got["either-group"].Message)
	assert.Contains(t, got["either-group"].Message, "may create events.events.k8s.io")
	assert.Equal(t, report.Fail, got["core-only"].Status, got["core-only"].Message)
	assert.Equal(t, report.Fail, got["neither"].Status, got["neither"].Message)
	assert.Contains(t, got["neither"].Message, "may not delete events or events.events.k8s.io")
}

// boundServiceAccount makes a ServiceAccount controller-manager in a
// namespace of the test and binds it to a ClusterRole with rule, as a
// project's config/rbac would; it returns the namespace and the name.
func boundServiceAccount(ctx context.Context, t *testing.T, role string, rule rbacv1.PolicyRule) (string, string) {
	t.Helper()
	ns := env.Namespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "controller-manager"}}
	require.NoError(t, env.Client.Create(ctx, sa))
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + role}, Rules: []rbacv1.PolicyRule{rule}}
	require.NoError(t, env.Client.Create(ctx, cr))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cr) })
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + role + "-rolebinding"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}}}
	require.NoError(t, env.Client.Create(ctx, binding))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	return ns, sa.Name
}
