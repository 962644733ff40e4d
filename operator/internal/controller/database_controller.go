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
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// reconcileSecret makes sure the credentials Secret exists with the spec's
// username and database. The password is generated once and never rotated.
func (r *DatabaseReconciler) reconcileSecret(ctx context.Context, db *databasev1.Database) error {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: db.Namespace, Name: secretName(db)}
	err := r.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: corev1.SecretTypeOpaque}
		if err := r.mutateSecret(secret, db); err != nil {
			return err
		}
		logf.FromContext(ctx).Info("Creating Secret", "secret", key.Name)
		if err := r.Create(ctx, secret); err == nil || !apierrors.IsAlreadyExists(err) {
			return err
		}
		// The cache was behind: someone (us, a moment ago) created it.
		err = r.reader().Get(ctx, key, secret)
	}
	if err != nil {
		return err
	}
	check := secret.DeepCopy()
	if err := r.mutateSecret(check, db); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(check.Data, secret.Data) && equality.Semantic.DeepEqual(check.OwnerReferences, secret.OwnerReferences) {
		return nil
	}
	logf.FromContext(ctx).Info("Correcting drift of Secret", "secret", key.Name)
	return r.updateWithRetry(ctx, secret, func() error { return r.mutateSecret(secret, db) })
}

// mutateSecret applies the desired state to a credentials Secret, keeping the
// existing password when there is one.
func (r *DatabaseReconciler) mutateSecret(secret *corev1.Secret, db *databasev1.Database) error {
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data["username"] = []byte(db.Spec.Username)
	secret.Data["database"] = []byte(db.Spec.DatabaseName)
	if len(secret.Data["password"]) == 0 {
		password, err := generatePassword()
		if err != nil {
			return err
		}
		secret.Data["password"] = []byte(password)
	}
	return controllerutil.SetControllerReference(db, secret, r.Scheme)
}

// reconcileStatefulSet creates the StatefulSet or corrects its drift. A change of
// replicas alone is applied with a merge patch; any other change with an update
// retried on conflict. It returns the StatefulSet and whether it was created.
func (r *DatabaseReconciler) reconcileStatefulSet(ctx context.Context, db *databasev1.Database) (*appsv1.StatefulSet, bool, error) {
	log := logf.FromContext(ctx)
	desired, err := r.desiredStatefulSet(db)
	if err != nil {
		return nil, false, err
	}
	statefulSet := &appsv1.StatefulSet{}
	key := client.ObjectKeyFromObject(desired)
	err = r.Get(ctx, key, statefulSet)
	if apierrors.IsNotFound(err) {
		log.Info("Creating StatefulSet", "statefulset", key.Name)
		if err := r.Create(ctx, desired); err == nil {
			return desired, true, nil
		} else if !apierrors.IsAlreadyExists(err) {
			return nil, false, err
		}
		err = r.reader().Get(ctx, key, statefulSet)
	}
	if err != nil {
		return nil, false, err
	}

	replicasDiffer, otherDiffer := statefulSetDrift(statefulSet, desired)
	switch {
	case otherDiffer:
		log.Info("Updating StatefulSet", "statefulset", key.Name)
		err = r.updateWithRetry(ctx, statefulSet, func() error {
			return r.mutateStatefulSet(statefulSet, desired, db)
		})
	case replicasDiffer:
		// If only replicas changed, use patch. The values are compared, not the
		// *int32 pointers (course bug B1: comparing pointers is always true).
		log.Info("Patching StatefulSet replicas", "statefulset", key.Name,
			"from", ptr.Deref(statefulSet.Spec.Replicas, 1), "to", *desired.Spec.Replicas)
		err = r.patchStatefulSetReplicas(ctx, statefulSet, *desired.Spec.Replicas)
	}
	return statefulSet, false, err
}

// statefulSetDrift compares an existing StatefulSet with the desired one, field
// by field for the fields this operator owns (values, never pointers), and says
// whether the replicas differ and whether anything else differs.
func statefulSetDrift(existing, desired *appsv1.StatefulSet) (replicasDiffer, otherDiffer bool) {
	replicasDiffer = ptr.Deref(existing.Spec.Replicas, 1) != ptr.Deref(desired.Spec.Replicas, 1)

	owner := metav1.GetControllerOf(desired)
	if !metav1.IsControlledBy(existing, ownerObject(owner)) {
		return replicasDiffer, true
	}
	for k, v := range desired.Spec.Template.Labels {
		if existing.Spec.Template.Labels[k] != v {
			return replicasDiffer, true
		}
	}
	want := desired.Spec.Template.Spec.Containers[0]
	got := findContainer(existing.Spec.Template.Spec.Containers, want.Name)
	if got == nil ||
		got.Image != want.Image ||
		!equality.Semantic.DeepEqual(got.Env, want.Env) ||
		!equality.Semantic.DeepEqual(got.Ports, want.Ports) ||
		!equality.Semantic.DeepEqual(got.VolumeMounts, want.VolumeMounts) ||
		!equality.Semantic.DeepEqual(got.Resources, want.Resources) {
		return replicasDiffer, true
	}
	return replicasDiffer, false
}

// mutateStatefulSet applies the desired state onto an existing StatefulSet,
// keeping the fields the API server defaulted and the immutable ones (selector,
// volumeClaimTemplates) as they are.
func (r *DatabaseReconciler) mutateStatefulSet(statefulSet, desired *appsv1.StatefulSet, db *databasev1.Database) error {
	statefulSet.Spec.Replicas = ptr.To(*desired.Spec.Replicas)
	if statefulSet.Spec.Template.Labels == nil {
		statefulSet.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range desired.Spec.Template.Labels {
		statefulSet.Spec.Template.Labels[k] = v
	}
	want := desired.Spec.Template.Spec.Containers[0].DeepCopy()
	got := findContainer(statefulSet.Spec.Template.Spec.Containers, want.Name)
	if got == nil {
		statefulSet.Spec.Template.Spec.Containers = append(statefulSet.Spec.Template.Spec.Containers, *want)
	} else {
		got.Image = want.Image
		got.Env = want.Env
		got.Ports = want.Ports
		got.VolumeMounts = want.VolumeMounts
		got.Resources = want.Resources
	}
	return controllerutil.SetControllerReference(db, statefulSet, r.Scheme)
}

// patchStatefulSetReplicas changes only spec.replicas, with a JSON merge patch
// computed against the object as read: no full update, no conflict on an
// unrelated concurrent change.
func (r *DatabaseReconciler) patchStatefulSetReplicas(ctx context.Context, statefulSet *appsv1.StatefulSet, replicas int32) error {
	patch := client.MergeFrom(statefulSet.DeepCopy())
	statefulSet.Spec.Replicas = &replicas
	return r.Patch(ctx, statefulSet, patch)
}

// updateWithRetry updates obj, retrying on conflict with client-go's
// retry.RetryOnConflict. Every attempt reads the newest obj from the API server
// and calls mutate to apply the desired changes to it again before the update,
// so a conflict never loses them (course bug B2 re-read and then sent the re-read
// object without the changes). mutate must modify obj itself.
func (r *DatabaseReconciler) updateWithRetry(ctx context.Context, obj client.Object, mutate func() error) error {
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.reader().Get(ctx, key, obj); err != nil {
			return err
		}
		if err := mutate(); err != nil {
			return err
		}
		return r.Update(ctx, obj)
	})
}

// reconcileService creates the Service or corrects its drift.
func (r *DatabaseReconciler) reconcileService(ctx context.Context, db *databasev1.Database) error {
	service := &corev1.Service{}
	key := client.ObjectKey{Namespace: db.Namespace, Name: db.Name}
	err := r.Get(ctx, key, service)
	if apierrors.IsNotFound(err) {
		service = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := r.mutateService(service, db); err != nil {
			return err
		}
		logf.FromContext(ctx).Info("Creating Service", "service", key.Name)
		if err := r.Create(ctx, service); err == nil || !apierrors.IsAlreadyExists(err) {
			return err
		}
		err = r.reader().Get(ctx, key, service)
	}
	if err != nil {
		return err
	}
	check := service.DeepCopy()
	if err := r.mutateService(check, db); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(check.Spec, service.Spec) && equality.Semantic.DeepEqual(check.OwnerReferences, service.OwnerReferences) {
		return nil
	}
	logf.FromContext(ctx).Info("Correcting drift of Service", "service", key.Name)
	return r.updateWithRetry(ctx, service, func() error { return r.mutateService(service, db) })
}

// mutateService applies the desired type, selector and port to a Service,
// keeping what the API server assigned (cluster IPs and the like).
func (r *DatabaseReconciler) mutateService(service *corev1.Service, db *databasev1.Database) error {
	service.Spec.Type = corev1.ServiceTypeClusterIP
	service.Spec.Selector = podLabels(db)
	port := corev1.ServicePort{
		Name:       "postgres",
		Protocol:   corev1.ProtocolTCP,
		Port:       postgresPort,
		TargetPort: intstr.FromInt32(postgresPort),
	}
	if len(service.Spec.Ports) != 1 || service.Spec.Ports[0] != port {
		service.Spec.Ports = []corev1.ServicePort{port}
	}
	return controllerutil.SetControllerReference(db, service, r.Scheme)
}

// desiredStatefulSet builds the StatefulSet for a Database, with its controller
// owner reference.
func (r *DatabaseReconciler) desiredStatefulSet(db *databasev1.Database) (*appsv1.StatefulSet, error) {
	size, err := resource.ParseQuantity(db.Spec.Storage.Size)
	if err != nil {
		return nil, fmt.Errorf("spec.storage.size: %w", err)
	}
	labels := podLabels(db)
	secretRef := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secretName(db)},
			Key:                  key,
		}}
	}
	claim := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: dataVolumeName},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: size,
			}},
		},
	}
	if db.Spec.Storage.StorageClass != "" {
		claim.Spec.StorageClassName = ptr.To(db.Spec.Storage.StorageClass)
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: db.Name, Namespace: db.Namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(desiredReplicas(db)),
			ServiceName: db.Name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  postgresContainer,
					Image: db.Spec.Image,
					Ports: []corev1.ContainerPort{{Name: "postgres", ContainerPort: postgresPort, Protocol: corev1.ProtocolTCP}},
					Env: []corev1.EnvVar{
						{Name: "POSTGRES_DB", ValueFrom: secretRef("database")},
						{Name: "POSTGRES_USER", ValueFrom: secretRef("username")},
						{Name: "POSTGRES_PASSWORD", ValueFrom: secretRef("password")},
						{Name: "PGDATA", Value: pgDataPath},
					},
					VolumeMounts: []corev1.VolumeMount{{Name: dataVolumeName, MountPath: dataMountPath}},
					Resources:    *db.Spec.Resources.DeepCopy(),
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claim},
		},
	}
	if err := controllerutil.SetControllerReference(db, sts, r.Scheme); err != nil {
		return nil, err
	}
	return sts, nil
}

// listDatabasesInNamespace lists the Databases of one namespace.
func (r *DatabaseReconciler) listDatabasesInNamespace(ctx context.Context, namespace string) (*databasev1.DatabaseList, error) {
	list := &databasev1.DatabaseList{}
	err := r.List(ctx, list, client.InNamespace(namespace))
	return list, err
}

// listDatabasesByLabel lists the Databases whose labels include all of labels.
func (r *DatabaseReconciler) listDatabasesByLabel(ctx context.Context, labels map[string]string) (*databasev1.DatabaseList, error) {
	list := &databasev1.DatabaseList{}
	err := r.List(ctx, list, client.MatchingLabels(labels))
	return list, err
}

// findDatabasesByOwner lists the Databases that have an owner named ownerName
// (in namespace, or in all namespaces when it is empty). It queries the field
// index ownerNameField that SetupWithManager registers; without that index a
// cached List fails (course bug B3).
func (r *DatabaseReconciler) findDatabasesByOwner(ctx context.Context, namespace, ownerName string) (*databasev1.DatabaseList, error) {
	list := &databasev1.DatabaseList{}
	opts := []client.ListOption{client.MatchingFields{ownerNameField: ownerName}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	err := r.List(ctx, list, opts...)
	return list, err
}

// databasesForBackup maps a Backup event to the Databases whose spec.backupRef
// names that Backup, through the backupRefField index.
func (r *DatabaseReconciler) databasesForBackup(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &databasev1.DatabaseList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{backupRefField: obj.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "Listing the Databases that reference a Backup", "backup", obj.GetName())
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for _, db := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&db)})
	}
	return requests
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

func findContainer(containers []corev1.Container, name string) *corev1.Container {
	for i := range containers {
		if containers[i].Name == name {
			return &containers[i]
		}
	}
	return nil
}

func desiredReplicas(db *databasev1.Database) int32 {
	return ptr.Deref(db.Spec.Replicas, 1)
}

func secretName(db *databasev1.Database) string {
	return db.Name + "-credentials"
}

func podLabels(db *databasev1.Database) map[string]string {
	return map[string]string{"app": "database", "database": db.Name}
}

// generatePassword returns 16 random characters of base64url.
func generatePassword() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
