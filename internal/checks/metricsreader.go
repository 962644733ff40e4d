package checks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// metricsReaderName is labctl's own metrics reader: a ServiceAccount in
// the run's namespace, as Prometheus scrapes with an account of its own.
const metricsReaderName = "labctl-metrics-reader"

// ensureMetricsReader makes labctl's metrics reader in the run's namespace
// and lets it get /metrics, and returns it as namespace/name. The
// ClusterRole and ClusterRoleBinding are owned by the namespace, so the
// garbage collector removes them with it.
func ensureMetricsReader(ctx context.Context, c *Context) (string, error) {
	cl := c.Client()
	ns := &corev1.Namespace{}
	if err := cl.Get(ctx, client.ObjectKey{Name: c.Namespace()}, ns); err != nil {
		return "", fmt.Errorf("reading namespace %s: %w", c.Namespace(), err)
	}
	owned := metav1.ObjectMeta{
		Name:            metricsReaderName + "-" + ns.Name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: ns.Name, UID: ns.UID}},
	}
	objects := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: metricsReaderName, Namespace: ns.Name}},
		&rbacv1.ClusterRole{ObjectMeta: owned,
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: owned,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: owned.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: metricsReaderName, Namespace: ns.Name}}},
	}
	for _, obj := range objects {
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating labctl's metrics reader (%T %s): %w", obj, obj.GetName(), err)
		}
	}
	return ns.Name + "/" + metricsReaderName, nil
}
