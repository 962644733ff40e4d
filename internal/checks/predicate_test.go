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

const watchSetup = `package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

func (r *DatabaseReconciler) findDatabasesByImage(ctx context.Context, image string) error {
	databases := &databasev1.DatabaseList{}
	return r.List(ctx, databases, client.MatchingFields{"spec.image": image})
}

func (r *DatabaseReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &databasev1.Database{}, "spec.image", func(obj client.Object) []string { return []string{obj.(*databasev1.Database).Spec.Image} }); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&databasev1.Database{}).
		Owns(&appsv1.StatefulSet{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				oldSS := e.ObjectOld.(*appsv1.StatefulSet)
				newSS := e.ObjectNew.(*appsv1.StatefulSet)
				return oldSS.Generation != newSS.Generation ||
					oldSS.Status.ReadyReplicas != newSS.Status.ReadyReplicas
			},
		})).
		Owns(&corev1.Service{}).
		Complete(r)
}
`

func writeProject(t *testing.T, code string) *Context {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "internal", "controller"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "internal", "controller", "c.go"), []byte(code), 0o644))
	return projectContext(dir)
}

const (
	stsPredicate = `{"kind":"StatefulSet","fields":["Generation","ReadyReplicas"]}`
	imageIndex   = `{"list":"DatabaseList","field":"spec.image"}`
)

func TestWatchChecksOnTheReferenceOperator(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "operator"))
	require.NoError(t, err)
	c := projectContext(dir)
	out := runCheck(t, c, "owns-predicate", stsPredicate)
	assert.Equal(t, report.Pass, out.Status, out.Message)
	out = runCheck(t, c, "field-index", imageIndex)
	assert.Equal(t, report.Pass, out.Status, out.Message)
}

func TestWatchChecks(t *testing.T) {
	t.Run("the course's watch setup", func(t *testing.T) {
		c := writeProject(t, watchSetup)
		assert.Equal(t, report.Pass, runCheck(t, c, "owns-predicate", stsPredicate).Status)
		assert.Equal(t, report.Pass, runCheck(t, c, "field-index", imageIndex).Status)
	})
	t.Run("a predicate in a package variable", func(t *testing.T) {
		code := strings.Replace(watchSetup, "builder.WithPredicates(predicate.Funcs{", "builder.WithPredicates(stsChanged)).\n\t\tOwns(&corev1.Secret{}).\n\t\tNamed(\"x\").\n\t\tWithOptions(opts(predicate.Funcs{", 1)
		code += "\nvar stsChanged = predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{UpdateFunc: readyChanged})\n" +
			"func readyChanged(e event.UpdateEvent) bool { return ready(e.ObjectOld) != ready(e.ObjectNew) }\n" +
			"func ready(o client.Object) int32 { return o.(*appsv1.StatefulSet).Status.ReadyReplicas }\n"
		out := runCheck(t, writeProject(t, code), "owns-predicate", stsPredicate)
		assert.Equal(t, report.Pass, out.Status, out.Message)
	})
	t.Run("no predicate", func(t *testing.T) {
		code := strings.Replace(watchSetup, "Owns(&appsv1.StatefulSet{}, builder.WithPredicates(", "Owns(&appsv1.StatefulSet{}).Named(", 1)
		out := runCheck(t, writeProject(t, code), "owns-predicate", stsPredicate)
		assert.Equal(t, report.Fail, out.Status)
		assert.Contains(t, out.Message, "has no builder.WithPredicates")
	})
	t.Run("a predicate on generation only", func(t *testing.T) {
		code := strings.Replace(watchSetup, " ||\n\t\t\t\t\toldSS.Status.ReadyReplicas != newSS.Status.ReadyReplicas", "", 1)
		out := runCheck(t, writeProject(t, code), "owns-predicate", stsPredicate)
		assert.Equal(t, report.Fail, out.Status)
		assert.Contains(t, out.Message, "drops an update that changes ReadyReplicas")
	})
	t.Run("no Owns at all", func(t *testing.T) {
		code := strings.Replace(watchSetup, "Owns(&appsv1.StatefulSet{},", "Watches(&appsv1.StatefulSet{},", 1)
		assert.Equal(t, report.Fail, runCheck(t, writeProject(t, code), "owns-predicate", stsPredicate).Status)
	})
	t.Run("index on another field", func(t *testing.T) {
		code := strings.ReplaceAll(watchSetup, `"spec.image"`, `"spec.databaseName"`)
		code = strings.ReplaceAll(code, "Spec.Image", "Spec.DatabaseName")
		out := runCheck(t, writeProject(t, code), "field-index", imageIndex)
		assert.Equal(t, report.Fail, out.Status)
		assert.Contains(t, out.Message, `no index on spec.image`)
	})
	// Lab 3.4's owner lookup without its index is lab 3.4's defect (its
	// task 5.1 fails for it): lab 4.3, asking for the spec.image index,
	// notes it and passes, so the one defect is charged once.
	t.Run("another lab's key without an index", func(t *testing.T) {
		code := watchSetup + `
func (r *DatabaseReconciler) findDatabasesByOwner(ctx context.Context, owner string) error {
	return r.List(ctx, &databasev1.DatabaseList{}, client.MatchingFields{".metadata.ownerReferences[0].name": owner})
}
`
		c := writeProject(t, code)
		out := runCheck(t, c, "field-index", imageIndex)
		assert.Equal(t, report.Pass, out.Status, out.Message)
		assert.Contains(t, strings.Join(out.Notes, "\n"), ".metadata.ownerReferences[0].name")
		assert.NotContains(t, strings.Join(out.Notes, "\n"), `"spec.image"`, "this lab's own key is judged, not noted")
		// Lab 3.4's check, on every key, still fails it.
		assert.Equal(t, report.Fail, runCheck(t, c, "field-index", `{"list":"DatabaseList"}`).Status)
	})
	t.Run("index never queried", func(t *testing.T) {
		code := strings.Replace(watchSetup, `client.MatchingFields{"spec.image": image}`, `client.MatchingFields{"spec.databaseName": image}`, 1)
		code = strings.Replace(code, "return err\n\t}\n\treturn ctrl", "return err\n\t}\n\t_ = mgr.GetFieldIndexer().IndexField(ctx, &databasev1.Database{}, \"spec.databaseName\", nil)\n\treturn ctrl", 1)
		out := runCheck(t, writeProject(t, code), "field-index", imageIndex)
		assert.Equal(t, report.Fail, out.Status)
		assert.Contains(t, out.Message, "no List queries it")
	})
}
