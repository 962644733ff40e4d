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
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

const (
	postgresPort      = 5432
	postgresContainer = "postgres"
	dataVolumeName    = "data"
	dataMountPath     = "/var/lib/postgresql/data"
	pgDataPath        = "/var/lib/postgresql/data/pgdata"

	// backupRefField indexes Databases by spec.backupRef.name, so a Backup event
	// finds the Databases that wait for it.
	backupRefField = "spec.backupRef.name"
	// ownerNameField indexes Databases by the names of their owners
	// (metadata.ownerReferences[*].name); findDatabasesByOwner queries it.
	ownerNameField = ".metadata.ownerReferences.name"
	// imageField indexes Databases by spec.image (lab 4.3);
	// findDatabasesByImage queries it.
	imageField = "spec.image"
)

// DatabaseReconciler reconciles a Database object
type DatabaseReconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// Recorder emits Kubernetes events; nil disables them.
	Recorder events.EventRecorder
	// APIReader reads straight from the API server (mgr.GetAPIReader()). The
	// update-with-retry path uses it so every attempt starts from the newest
	// object, not from a cache that may still be behind. Nil falls back to Client.
	APIReader client.Reader
}

// +kubebuilder:rbac:groups=database.example.com,resources=databases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=database.example.com,resources=databases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=database.example.com,resources=databases/finalizers,verbs=update
// +kubebuilder:rbac:groups=database.example.com,resources=backups,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves a Database towards its desired state: credentials Secret,
// StatefulSet and Service exist and match the spec, and the status tells how far
// the rollout is. Every child is watched, so the loop never polls. A deleted
// Database is held by its finalizer until its children are gone.
func (r *DatabaseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	defer observeReconcile()(&result, &err)
	db := &databasev1.Database{}
	if err := r.Get(ctx, req.NamespacedName, db); err != nil {
		if apierrors.IsNotFound(err) {
			forgetDatabaseInfo(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	defer recordDatabaseInfo(db)
	if !db.DeletionTimestamp.IsZero() {
		return r.handleDeletion(ctx, db)
	}
	if err := r.ensureFinalizer(ctx, db); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileWithStateMachine(ctx, db)
}

// reconcileWithStateMachine runs the Database state machine, one step per
// pass; each step writes the next phase to the status, whose watch event
// starts the next pass at once:
//
//	Pending --(backupRef ready)--> Provisioning: Secret and StatefulSet
//	Provisioning --> Configuring: Service
//	Configuring --> Deploying --(readyReplicas == replicas)--> Verifying
//	Verifying --(children there, replicas ready)--> Ready
//	Ready --(StatefulSet deleted)--> Provisioning
//	Ready --(replicas not ready, e.g. scaling)--> Deploying
//	any --(child cannot be created or updated)--> Failed --(next attempt)--> Provisioning
//
// Deploying, Verifying and Ready also correct any drift of the children.
func (r *DatabaseReconciler) reconcileWithStateMachine(ctx context.Context, db *databasev1.Database) (ctrl.Result, error) {
	log := logf.FromContext(ctx).WithValues("database", db.Name)
	ctx = logf.IntoContext(ctx, log)
	base := db.DeepCopy()

	current := db.Status.Phase
	if current == "" {
		current = databasev1.DatabasePhasePending
	}

	sts := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: db.Name}, sts)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	stsExists := err == nil

	// Lab 8.2: with spec.backupRef the Database waits, before anything is
	// provisioned, for the referenced Backup's BackupReady condition.
	if !stsExists && (current == databasev1.DatabasePhasePending || current == databasev1.DatabasePhaseProvisioning) {
		ready, message, err := r.checkBackupStatus(ctx, db)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !ready {
			db.Status.Phase = databasev1.DatabasePhasePending
			db.Status.Ready = false
			r.setCondition(db, databasev1.ConditionProgressing, metav1.ConditionFalse, databasev1.ReasonWaitingForBackup, message)
			r.setCondition(db, databasev1.ConditionReady, metav1.ConditionFalse, databasev1.ReasonWaitingForBackup, message)
			// No requeue: the Backup watch (see SetupWithManager) brings us back
			// the moment the Backup changes.
			return ctrl.Result{}, r.updateStatus(ctx, base, db)
		}
	}

	desired := desiredReplicas(db)
	readyMsg := func() string { return fmt.Sprintf("%d/%d replicas ready", sts.Status.ReadyReplicas, desired) }
	notReady := func(reason, message string) {
		db.Status.Ready = false
		r.setCondition(db, databasev1.ConditionProgressing, metav1.ConditionTrue, reason, message)
		r.setCondition(db, databasev1.ConditionReady, metav1.ConditionFalse, databasev1.ReasonReplicasNotReady, readyMsg())
	}
	db.Status.SecretName = secretName(db)
	db.Status.Endpoint = fmt.Sprintf("%s.%s.svc.cluster.local:%d", db.Name, db.Namespace, postgresPort)

	switch current {
	case databasev1.DatabasePhasePending:
		db.Status.Phase = databasev1.DatabasePhaseProvisioning
		notReady(databasev1.ReasonProvisioning, "Provisioning the Secret and the StatefulSet")

	case databasev1.DatabasePhaseProvisioning, databasev1.DatabasePhaseFailed:
		if err := r.reconcileSecret(ctx, db); err != nil {
			return r.fail(ctx, base, db, databasev1.ReasonSecretCreationFailed, err)
		}
		var created bool
		if sts, created, err = r.reconcileStatefulSet(ctx, db); err != nil {
			return r.fail(ctx, base, db, databasev1.ReasonStatefulSetCreationFailed, err)
		}
		if created {
			r.event(db, corev1.EventTypeNormal, "Created", "Create",
				"Created Secret %s and StatefulSet %s", secretName(db), db.Name)
		}
		db.Status.Phase = databasev1.DatabasePhaseConfiguring
		notReady(databasev1.ReasonConfiguring, "Configuring the Service")

	case databasev1.DatabasePhaseConfiguring:
		if err := r.reconcileService(ctx, db); err != nil {
			return r.fail(ctx, base, db, databasev1.ReasonServiceCreationFailed, err)
		}
		db.Status.Phase = databasev1.DatabasePhaseDeploying
		notReady(databasev1.ReasonCreating, "Waiting for replicas: "+readyMsg())

	default: // Deploying, Verifying, Ready, or a phase this operator does not know
		created := false
		if stsExists {
			if created, err = r.reconcileChildren(ctx, db, &sts); err != nil {
				return r.fail(ctx, base, db, reasonOf(err), err)
			}
		}
		// Missing, or deleted between this pass's two reads of it (the cache
		// saw the delete meanwhile and reconcileChildren made a new one):
		// either way it was lost, and the machine starts again.
		if !stsExists || created {
			log.Info("StatefulSet missing, provisioning it again")
			db.Status.Phase = databasev1.DatabasePhaseProvisioning
			db.Status.Ready = false
			r.setCondition(db, databasev1.ConditionProgressing, metav1.ConditionTrue, databasev1.ReasonProvisioning, "StatefulSet "+db.Name+" is missing")
			r.setCondition(db, databasev1.ConditionReady, metav1.ConditionFalse, databasev1.ReasonStatefulSetMissing, "StatefulSet "+db.Name+" is missing")
			break
		}
		allReady := sts.Status.ReadyReplicas == desired
		switch {
		case !allReady:
			reason := databasev1.ReasonCreating
			if current == databasev1.DatabasePhaseReady || isConditionReason(db, databasev1.ConditionProgressing, databasev1.ReasonScaling) {
				reason = databasev1.ReasonScaling
			}
			db.Status.Phase = databasev1.DatabasePhaseDeploying
			notReady(reason, "Waiting for replicas: "+readyMsg())
		case current == databasev1.DatabasePhaseDeploying:
			db.Status.Phase = databasev1.DatabasePhaseVerifying
			notReady(databasev1.ReasonVerifying, "Verifying the Secret, the Service and "+readyMsg())
		default: // Verifying passed, or still Ready
			db.Status.Phase = databasev1.DatabasePhaseReady
			db.Status.Ready = true
			r.setCondition(db, databasev1.ConditionProgressing, metav1.ConditionFalse, databasev1.ReasonReconciliationComplete, "Reconciliation complete")
			r.setCondition(db, databasev1.ConditionReady, metav1.ConditionTrue, databasev1.ReasonAllReplicasReady, readyMsg())
			if current != databasev1.DatabasePhaseReady {
				fields := []any{"replicas", desired}
				// Through the spec.image index: how many Databases of the
				// namespace share this image (what an image upgrade would touch).
				if same, err := r.findDatabasesByImage(ctx, db.Namespace, db.Spec.Image); err == nil {
					fields = append(fields, "image", db.Spec.Image, "databasesWithImage", len(same.Items))
				}
				log.Info("Database is now READY!", fields...)
			}
		}
	}
	if current != db.Status.Phase {
		log.Info(fmt.Sprintf("STATE TRANSITION: %s -> %s", current, db.Status.Phase))
	}
	// The next step starts from this status write's watch event; readiness
	// changes arrive through the StatefulSet watch (Owns): no requeue.
	return ctrl.Result{}, r.updateStatus(ctx, base, db)
}

// childError says which child could not be reconciled, for the Failed reason.
type childError struct {
	reason string
	err    error
}

func (e *childError) Error() string { return e.err.Error() }
func (e *childError) Unwrap() error { return e.err }

func reasonOf(err error) string {
	var ce *childError
	if errors.As(err, &ce) {
		return ce.reason
	}
	return databasev1.ReasonStatefulSetCreationFailed
}

// reconcileChildren makes the Secret, the StatefulSet and the Service match
// the spec, and returns the StatefulSet as it now is and whether it had to
// be created.
func (r *DatabaseReconciler) reconcileChildren(ctx context.Context, db *databasev1.Database, sts **appsv1.StatefulSet) (stsCreated bool, err error) {
	if err := r.reconcileSecret(ctx, db); err != nil {
		return false, &childError{databasev1.ReasonSecretCreationFailed, err}
	}
	got, stsCreated, err := r.reconcileStatefulSet(ctx, db)
	if err != nil {
		return false, &childError{databasev1.ReasonStatefulSetCreationFailed, err}
	}
	*sts = got
	if err := r.reconcileService(ctx, db); err != nil {
		return stsCreated, &childError{databasev1.ReasonServiceCreationFailed, err}
	}
	return stsCreated, nil
}

// fail records a failure to create or update a child and returns the error, so
// the request is retried with backoff. Conflicts and cache lag are transient and
// do not move the Database to Failed.
func (r *DatabaseReconciler) fail(ctx context.Context, base, db *databasev1.Database, reason string, cause error) (ctrl.Result, error) {
	if apierrors.IsConflict(cause) || apierrors.IsAlreadyExists(cause) {
		return ctrl.Result{}, cause
	}
	logf.FromContext(ctx).Error(cause, "Reconciliation failed", "reason", reason)
	r.event(db, corev1.EventTypeWarning, "CreateFailed", "Reconcile", "%s: %v", reason, cause)
	db.Status.Phase = databasev1.DatabasePhaseFailed
	db.Status.Ready = false
	r.setCondition(db, databasev1.ConditionReady, metav1.ConditionFalse, reason, cause.Error())
	r.setCondition(db, databasev1.ConditionProgressing, metav1.ConditionTrue, databasev1.ReasonRetrying, "Retrying after: "+cause.Error())
	if err := r.updateStatus(ctx, base, db); err != nil {
		logf.FromContext(ctx).Error(err, "Failed to record the failure in the status")
	}
	return ctrl.Result{}, cause
}

// checkBackupStatus reports whether the Backup named by spec.backupRef is ready,
// reading its BackupReady condition (never its phase). A Backup that has no
// condition yet is simply not ready. The string explains what is awaited.
func (r *DatabaseReconciler) checkBackupStatus(ctx context.Context, db *databasev1.Database) (bool, string, error) {
	if db.Spec.BackupRef == nil || db.Spec.BackupRef.Name == "" {
		return true, "", nil
	}
	log := logf.FromContext(ctx)
	name := db.Spec.BackupRef.Name
	backup := &databasev1.Backup{}
	err := r.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: name}, backup)
	if apierrors.IsNotFound(err) {
		log.Info("Backup not found, waiting", "backup", name)
		return false, fmt.Sprintf("Waiting for Backup %s: not found", name), nil
	}
	if err != nil {
		return false, "", err
	}
	if backup.Spec.DatabaseRef.Name == db.Name {
		// A Backup of this very Database can only run once the Database is
		// Ready: waiting for it would deadlock both (course erratum, lab 8.2).
		log.Info("Backup references this Database itself; not waiting for it", "backup", name)
		return true, "", nil
	}
	condition := meta.FindStatusCondition(backup.Status.Conditions, databasev1.ConditionBackupReady)
	if condition == nil {
		log.Info("Waiting for backup condition to be ready", "backup", name, "condition", "none")
		return false, fmt.Sprintf("Waiting for Backup %s: no %s condition yet", name, databasev1.ConditionBackupReady), nil
	}
	if condition.Status != metav1.ConditionTrue {
		log.Info("Waiting for backup condition to be ready", "backup", name,
			"status", condition.Status, "reason", condition.Reason)
		return false, fmt.Sprintf("Waiting for Backup %s: %s=%s (%s)", name, databasev1.ConditionBackupReady, condition.Status, condition.Reason), nil
	}
	return true, "", nil
}

// SetupWithManager sets up the controller with the Manager: the field indexes,
// the owned children and the Backups that Databases may wait for.
func (r *DatabaseReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &databasev1.Database{}, backupRefField, func(obj client.Object) []string {
		db := obj.(*databasev1.Database)
		if db.Spec.BackupRef == nil || db.Spec.BackupRef.Name == "" {
			return nil
		}
		return []string{db.Spec.BackupRef.Name}
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &databasev1.Database{}, ownerNameField, func(obj client.Object) []string {
		names := make([]string, 0, len(obj.GetOwnerReferences()))
		for _, ref := range obj.GetOwnerReferences() {
			names = append(names, ref.Name)
		}
		return names
	}); err != nil {
		return err
	}

	if err := indexer.IndexField(ctx, &databasev1.Database{}, imageField, func(obj client.Object) []string {
		return []string{obj.(*databasev1.Database).Spec.Image}
	}); err != nil {
		return err
	}

	return ctrl.NewControllerManagedBy(mgr).
		For(&databasev1.Database{}).
		Owns(&appsv1.StatefulSet{}, builder.WithPredicates(statefulSetChanged)).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{}).
		Watches(&databasev1.Backup{}, handler.EnqueueRequestsFromMapFunc(r.databasesForBackup)).
		Named("database").
		Complete(r)
}

func (r *DatabaseReconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// updateStatus writes the status when it changed, with a merge patch that
// carries base's resourceVersion. Without it a pass that read a stale cache
// would send only the fields it changed, and they would land on a newer
// status: phase Deploying from one write beside condition Ready True from
// another. A conflict means that newer Database is already on its way
// through the watch, which reconciles it again; nothing to retry here.
func (r *DatabaseReconciler) updateStatus(ctx context.Context, base, db *databasev1.Database) error {
	db.Status.ObservedGeneration = db.Generation
	if equality.Semantic.DeepEqual(base.Status, db.Status) {
		return nil
	}
	err := r.Status().Patch(ctx, db, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return err
	}
	r.announce(base, db)
	return nil
}

// announce emits the events that tell of a status change once that status
// is written: a pass whose write conflicted announces nothing, and the pass
// that writes the change announces it once.
func (r *DatabaseReconciler) announce(before, after *databasev1.Database) {
	if after.Status.Phase == databasev1.DatabasePhaseReady && before.Status.Phase != databasev1.DatabasePhaseReady {
		msg := ""
		if c := meta.FindStatusCondition(after.Status.Conditions, databasev1.ConditionReady); c != nil {
			msg = c.Message
		}
		r.event(after, corev1.EventTypeNormal, "Ready", "Reconcile", "Database is ready: %s", msg)
	}
	if isConditionReason(after, databasev1.ConditionProgressing, databasev1.ReasonWaitingForBackup) &&
		!isConditionReason(before, databasev1.ConditionProgressing, databasev1.ReasonWaitingForBackup) {
		c := meta.FindStatusCondition(after.Status.Conditions, databasev1.ConditionProgressing)
		r.event(after, corev1.EventTypeNormal, databasev1.ReasonWaitingForBackup, "Wait", "%s", c.Message)
	}
	// A cleanup that takes more than one pass says so in its status; one
	// that finishes at once announces itself in handleDeletion.
	if isConditionReason(after, databasev1.ConditionProgressing, databasev1.ReasonDeleting) &&
		!isConditionReason(before, databasev1.ConditionProgressing, databasev1.ReasonDeleting) {
		r.event(after, corev1.EventTypeNormal, databasev1.ReasonDeleting, "Delete", deletingMessage)
	}
}

func (r *DatabaseReconciler) setCondition(db *databasev1.Database, conditionType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&db.Status.Conditions, metav1.Condition{
		Type:               conditionType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: db.Generation,
	})
}

func (r *DatabaseReconciler) event(obj runtime.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, reason, action, note, args...)
	}
}

func isConditionReason(db *databasev1.Database, conditionType, reason string) bool {
	c := meta.FindStatusCondition(db.Status.Conditions, conditionType)
	return c != nil && c.Reason == reason
}

// ownerObject turns an owner reference into an object that metav1.IsControlledBy
// can compare (it looks at the UID only).
func ownerObject(ref *metav1.OwnerReference) metav1.Object {
	obj := &metav1.ObjectMeta{}
	if ref != nil {
		obj.UID = ref.UID
	}
	return obj
}
