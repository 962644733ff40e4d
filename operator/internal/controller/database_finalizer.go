/*
Copyright 2026 The labctl authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

// cleanupRetry is how soon a cleanup that could not finish is tried again.
// A child held by someone else's finalizer sends no event this controller
// maps back to the Database once the garbage collector (orphan deletion)
// has removed its owner reference, so waiting for it means asking again.
const cleanupRetry = time.Second

// deletingMessage says what the cleanup of a deleted Database does, in its
// Progressing condition and in its Deleting event.
const deletingMessage = "Deleting the StatefulSet, the Service and the Secret"

// ensureFinalizer adds the Database finalizer (lab 4.2) before anything is
// created, so no child can outlive a deletion unnoticed. The patch carries
// the resourceVersion: finalizers are a list another party may change too.
func (r *DatabaseReconciler) ensureFinalizer(ctx context.Context, db *databasev1.Database) error {
	if controllerutil.ContainsFinalizer(db, databasev1.DatabaseFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(db.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(db, databasev1.DatabaseFinalizer)
	return r.Patch(ctx, db, patch)
}

// handleDeletion runs the cleanup of a deleted Database and removes the
// finalizer once the StatefulSet, the Service and the Secret are gone. The
// StatefulSet's volume claims stay, as Kubernetes keeps them by design. A
// cleanup that cannot finish says why in Ready=False reason CleanupFailed and
// is tried again; cleanup is idempotent, so a repeated pass is harmless.
func (r *DatabaseReconciler) handleDeletion(ctx context.Context, db *databasev1.Database) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(db, databasev1.DatabaseFinalizer) {
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx).WithValues("database", db.Name)
	remaining, err := r.cleanupChildren(ctx, db)
	if err == nil && len(remaining) == 0 {
		// The patch carries the resourceVersion, so when it succeeds this
		// pass read the latest status: if that status does not say Deleting,
		// no earlier pass announced the cleanup (see announce).
		announced := isConditionReason(db, databasev1.ConditionProgressing, databasev1.ReasonDeleting)
		patch := client.MergeFromWithOptions(db.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(db, databasev1.DatabaseFinalizer)
		if err := r.Patch(ctx, db, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		log.Info("Cleanup completed, finalizer removed")
		if !announced {
			r.event(db, corev1.EventTypeNormal, databasev1.ReasonDeleting, "Delete", deletingMessage)
		}
		r.event(db, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted the StatefulSet, the Service and the Secret; finalizer removed")
		return ctrl.Result{}, nil
	}
	if err == nil {
		err = fmt.Errorf("waiting for %s to be deleted", strings.Join(remaining, ", "))
	}
	log.Info("Cleanup not finished", "reason", err.Error())
	base := db.DeepCopy()
	db.Status.Ready = false
	r.setCondition(db, databasev1.ConditionReady, metav1.ConditionFalse, databasev1.ReasonCleanupFailed, err.Error())
	r.setCondition(db, databasev1.ConditionProgressing, metav1.ConditionTrue, databasev1.ReasonDeleting, deletingMessage)
	if serr := r.updateStatus(ctx, base, db); serr != nil && !apierrors.IsNotFound(serr) {
		return ctrl.Result{}, serr
	}
	return ctrl.Result{RequeueAfter: cleanupRetry}, nil
}

// cleanupChildren deletes the StatefulSet, the Service and the Secret of a
// Database (each deletion is a no-op when the object is already gone or
// going) and names those still there afterwards, read from the API server,
// not the cache: an object held by a finalizer stays, with its
// deletionTimestamp set.
func (r *DatabaseReconciler) cleanupChildren(ctx context.Context, db *databasev1.Database) ([]string, error) {
	children := []struct {
		kind string
		obj  client.Object
	}{
		{"StatefulSet", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name}}},
		{"Service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name}}},
		{"Secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: secretName(db)}}},
	}
	var remaining []string
	for _, c := range children {
		if err := client.IgnoreNotFound(r.Delete(ctx, c.obj, client.PropagationPolicy(metav1.DeletePropagationBackground))); err != nil {
			return nil, fmt.Errorf("deleting %s %s: %w", c.kind, c.obj.GetName(), err)
		}
		err := r.reader().Get(ctx, client.ObjectKeyFromObject(c.obj), c.obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading %s %s: %w", c.kind, c.obj.GetName(), err)
		default:
			remaining = append(remaining, c.kind+" "+c.obj.GetName())
		}
	}
	return remaining, nil
}
