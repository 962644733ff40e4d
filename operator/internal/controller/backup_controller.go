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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

const (
	// databaseRefField indexes Backups by spec.databaseRef.name, so a Database
	// event finds the Backups that wait for it.
	databaseRefField = "spec.databaseRef.name"

	// Labels and annotations of a backup run's Job.
	labelBackup          = "database.example.com/backup"
	labelBackupUID       = "database.example.com/backup-uid"
	labelDatabase        = "database.example.com/database"
	annotationScheduled  = "database.example.com/scheduled-time"
	annotationLocation   = "database.example.com/backup-location"
	backupContainerName  = "pg-dump"
	backupVolumeName     = "backup"
	backupMountPath      = "/backup"
	backupTimeFormat     = "20060102-150405"
	backupJobBackoff     = 2
	backupJobDeadline    = 3600
	defaultBackupRetains = 5
)

// backupScript dumps the database into a temporary file, renames it once it is
// complete and then keeps only the newest $BACKUP_RETAIN dumps on the volume.
// Every value comes from the environment (libpq reads PGHOST, PGPORT, PGUSER,
// PGDATABASE and PGPASSWORD), so nothing from a spec is ever parsed by the shell.
const backupScript = `set -eu
tmp="${BACKUP_FILE}.partial"
echo "pg_dump: database ${PGDATABASE} at ${PGHOST}:${PGPORT} -> ${BACKUP_FILE}"
if ! pg_dump --host="${PGHOST}" --port="${PGPORT}" --username="${PGUSER}" --dbname="${PGDATABASE}" --no-password --file="${tmp}"; then
  rm -f "${tmp}"
  exit 1
fi
mv "${tmp}" "${BACKUP_FILE}"
ls -1t "${BACKUP_DIR}"/*.sql | tail -n +"$((BACKUP_RETAIN + 1))" | xargs -r rm -f --
echo "backup written to ${BACKUP_FILE}"
`

// BackupReconciler reconciles a Backup object. Each backup run is a batch/v1
// Job owned by the Backup; the Jobs are the controller's memory, so a restarted
// manager picks up where the previous one stopped.
type BackupReconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// Recorder emits Kubernetes events; nil disables them.
	Recorder events.EventRecorder
	// APIReader lists a Backup's Jobs straight from the API server, so a Job
	// created a moment ago is never missed (and never created twice). Nil falls
	// back to Client.
	APIReader client.Reader
	// Clock tells the time for schedules; nil means the real clock. Tests
	// inject a fake one.
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups=database.example.com,resources=backups,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=database.example.com,resources=backups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=database.example.com,resources=backups/finalizers,verbs=update
// +kubebuilder:rbac:groups=database.example.com,resources=databases,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile drives one Backup:
//
//   - a run whose Job is still active: InProgress, and wait for the Job watch;
//   - the newest finished run: Completed (BackupReady=True) or Failed;
//   - a run is due (the first one, or a cron time has passed) and the Database
//     is Ready: create the PVC if needed and the run's Job; while the Database
//     is missing or not Ready the first run stays Pending (the Database watch
//     brings us back);
//   - keep only the newest spec.retention run Jobs;
//   - with a schedule, requeue at the next cron time.
func (r *BackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	backup := &databasev1.Backup{}
	if err := r.Get(ctx, req.NamespacedName, backup); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !backup.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx).WithValues("backup", backup.Name, "database", backup.Spec.DatabaseRef.Name)
	ctx = logf.IntoContext(ctx, log)
	base := backup.DeepCopy()

	jobs, err := r.listRunJobs(ctx, backup)
	if err != nil {
		return ctrl.Result{}, err
	}
	var latest *batchv1.Job
	if len(jobs) > 0 {
		latest = &jobs[len(jobs)-1]
	}

	// A run is in flight: report it. The Job watch brings us back when it ends.
	if latest != nil && !jobFinished(latest) {
		r.setInProgress(backup, latest)
		return ctrl.Result{}, r.updateStatus(ctx, base, backup)
	}
	if latest != nil {
		r.setFinished(ctx, backup, latest)
	}

	now := r.now()
	due, scheduled, next, err := r.nextRun(backup, latest, now)
	if err != nil {
		if !r.conditionReasonIs(backup, databasev1.ReasonInvalidSchedule) {
			log.Error(err, "Invalid schedule", "schedule", backup.Spec.Schedule)
		}
		backup.Status.Phase = databasev1.BackupPhaseFailed
		r.setCondition(backup, metav1.ConditionFalse, databasev1.ReasonInvalidSchedule, fmt.Sprintf("invalid schedule %q: %v", backup.Spec.Schedule, err))
		// Nothing to retry until the spec changes (which triggers a reconcile).
		return ctrl.Result{}, r.updateStatus(ctx, base, backup)
	}
	result := ctrl.Result{}
	if !next.IsZero() {
		result.RequeueAfter = max(next.Sub(now), time.Second)
	}
	if !due {
		if err := r.pruneRuns(ctx, backup, jobs); err != nil {
			return ctrl.Result{}, err
		}
		return result, r.updateStatus(ctx, base, backup)
	}

	db := &databasev1.Database{}
	err = r.Get(ctx, client.ObjectKey{Namespace: backup.Namespace, Name: backup.Spec.DatabaseRef.Name}, db)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if err != nil || db.Status.Phase != databasev1.DatabasePhaseReady {
		reason, message := databasev1.ReasonDatabaseNotFound, fmt.Sprintf("Database %s not found", backup.Spec.DatabaseRef.Name)
		if err == nil {
			reason = databasev1.ReasonDatabaseNotReady
			message = fmt.Sprintf("Database %s is not ready (phase %q)", db.Name, db.Status.Phase)
		}
		log.Info("Backup waiting for its database", "reason", reason)
		if latest == nil {
			backup.Status.Phase = databasev1.BackupPhasePending
			r.setCondition(backup, metav1.ConditionFalse, reason, message)
		} else {
			// A scheduled run is due: the previous result stays valid and the
			// run starts as soon as the Database is Ready again.
			r.event(backup, db, corev1.EventTypeWarning, reason, "Schedule", "Scheduled backup delayed: %s", message)
		}
		// No requeue: the Database watch brings us back when it changes.
		return ctrl.Result{}, r.updateStatus(ctx, base, backup)
	}

	job, err := r.startRun(ctx, backup, db, scheduled)
	if err != nil {
		return ctrl.Result{}, err
	}
	jobs = append(jobs, *job)
	r.setInProgress(backup, job)
	if err := r.pruneRuns(ctx, backup, jobs); err != nil {
		return ctrl.Result{}, err
	}
	return result, r.updateStatus(ctx, base, backup)
}

// nextRun decides whether a run is due now and for which scheduled time, and
// when the one after it is due (zero without a schedule).
func (r *BackupReconciler) nextRun(backup *databasev1.Backup, latest *batchv1.Job, now time.Time) (due bool, scheduled, next time.Time, err error) {
	now = now.UTC().Truncate(time.Second)
	if backup.Spec.Schedule == "" {
		// One backup, as soon as the Database is Ready. A recorded result with
		// no Job left (someone deleted it) is not a reason to run again.
		done := backup.Status.Phase == databasev1.BackupPhaseCompleted || backup.Status.Phase == databasev1.BackupPhaseFailed
		return latest == nil && !done, now, time.Time{}, nil
	}
	schedule, err := parseSchedule(backup.Spec.Schedule)
	if err != nil {
		return false, time.Time{}, time.Time{}, err
	}
	if latest == nil {
		// The first run happens as soon as the Database is Ready.
		return true, now, schedule.Next(now), nil
	}
	last := scheduledTime(latest)
	t := schedule.Next(last)
	if now.Before(t) {
		return false, time.Time{}, t, nil
	}
	// Due: run once for the most recent missed time, not once per missed time.
	for i := 0; i < 10000; i++ {
		n := schedule.Next(t)
		if n.IsZero() || n.After(now) {
			break
		}
		t = n
	}
	return true, t, schedule.Next(now), nil
}

// startRun creates the backup volume (if needed) and the Job of one run.
func (r *BackupReconciler) startRun(ctx context.Context, backup *databasev1.Backup, db *databasev1.Database, scheduled time.Time) (*batchv1.Job, error) {
	log := logf.FromContext(ctx)
	pvc, err := r.ensureBackupVolume(ctx, backup, db)
	if err != nil {
		return nil, err
	}
	job, err := r.desiredJob(backup, db, pvc.Name, scheduled)
	if err != nil {
		return nil, err
	}
	log.Info("Starting backup", "job", job.Name, "location", job.Annotations[annotationLocation])
	if err := r.Create(ctx, job); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		// The run exists already (a previous attempt created it): resume it.
		if err := r.reader().Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return nil, err
		}
		return job, nil
	}
	r.event(backup, job, corev1.EventTypeNormal, "BackupStarted", "Backup",
		"Started backup job %s for database %s", job.Name, db.Name)
	return job, nil
}

// ensureBackupVolume returns the Backup's PVC, creating it when missing. It is
// owned by the Backup, sized like one database volume and of the same class.
func (r *BackupReconciler) ensureBackupVolume(ctx context.Context, backup *databasev1.Backup, db *databasev1.Database) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	key := client.ObjectKey{Namespace: backup.Namespace, Name: backupVolumeClaimName(backup)}
	err := r.Get(ctx, key, pvc)
	if err == nil || !apierrors.IsNotFound(err) {
		return pvc, err
	}
	size, err := resource.ParseQuantity(db.Spec.Storage.Size)
	if err != nil {
		return nil, fmt.Errorf("database %s spec.storage.size: %w", db.Name, err)
	}
	pvc = &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: runLabels(backup, db)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: size,
			}},
		},
	}
	if db.Spec.Storage.StorageClass != "" {
		pvc.Spec.StorageClassName = ptr.To(db.Spec.Storage.StorageClass)
	}
	if err := controllerutil.SetControllerReference(backup, pvc, r.Scheme); err != nil {
		return nil, err
	}
	logf.FromContext(ctx).Info("Creating backup volume", "pvc", pvc.Name)
	if err := r.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	return pvc, nil
}

// desiredJob builds the Job of one backup run: pg_dump from the Database's own
// image against its Service (host and port apart), authenticated with the
// credentials Secret, writing to the Backup's PVC.
func (r *BackupReconciler) desiredJob(backup *databasev1.Backup, db *databasev1.Database, claim string, scheduled time.Time) (*batchv1.Job, error) {
	stamp := scheduled.UTC().Format(backupTimeFormat)
	file := fmt.Sprintf("%s-%s.sql", db.Name, stamp)
	credentials := db.Status.SecretName
	if credentials == "" {
		credentials = secretName(db)
	}
	secretRef := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: credentials},
			Key:                  key,
		}}
	}
	labels := runLabels(backup, db)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: backup.Namespace,
			Name:      runJobName(backup.Name, stamp),
			Labels:    labels,
			Annotations: map[string]string{
				annotationScheduled: scheduled.UTC().Format(time.RFC3339),
				annotationLocation:  fmt.Sprintf("pvc://%s/%s", claim, file),
			},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](backupJobBackoff),
			ActiveDeadlineSeconds: ptr.To[int64](backupJobDeadline),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:    backupContainerName,
						Image:   db.Spec.Image,
						Command: []string{"/bin/sh", "-c", backupScript},
						Env: []corev1.EnvVar{
							{Name: "PGHOST", Value: db.Name},
							{Name: "PGPORT", Value: strconv.Itoa(postgresPort)},
							{Name: "PGUSER", ValueFrom: secretRef("username")},
							{Name: "PGDATABASE", ValueFrom: secretRef("database")},
							{Name: "PGPASSWORD", ValueFrom: secretRef("password")},
							{Name: "BACKUP_DIR", Value: backupMountPath},
							{Name: "BACKUP_FILE", Value: backupMountPath + "/" + file},
							{Name: "BACKUP_RETAIN", Value: strconv.Itoa(retention(backup))},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: backupVolumeName, MountPath: backupMountPath}},
					}},
					Volumes: []corev1.Volume{{
						Name: backupVolumeName,
						VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
							ClaimName: claim,
						}},
					}},
				},
			},
		},
	}
	if err := controllerutil.SetControllerReference(backup, job, r.Scheme); err != nil {
		return nil, err
	}
	return job, nil
}

// listRunJobs returns the Backup's run Jobs, oldest first. It reads from the
// API server (see APIReader) and keeps only Jobs this Backup controls.
func (r *BackupReconciler) listRunJobs(ctx context.Context, backup *databasev1.Backup) ([]batchv1.Job, error) {
	list := &batchv1.JobList{}
	if err := r.reader().List(ctx, list, client.InNamespace(backup.Namespace),
		client.MatchingLabels{labelBackupUID: string(backup.UID)}); err != nil {
		return nil, err
	}
	jobs := make([]batchv1.Job, 0, len(list.Items))
	for _, job := range list.Items {
		if metav1.IsControlledBy(&job, backup) && job.DeletionTimestamp.IsZero() {
			jobs = append(jobs, job)
		}
	}
	sort.SliceStable(jobs, func(i, j int) bool {
		ti, tj := scheduledTime(&jobs[i]), scheduledTime(&jobs[j])
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return jobs[i].Name < jobs[j].Name
	})
	return jobs, nil
}

// pruneRuns deletes the oldest finished run Jobs beyond spec.retention.
func (r *BackupReconciler) pruneRuns(ctx context.Context, backup *databasev1.Backup, jobs []batchv1.Job) error {
	keep := retention(backup)
	for i := 0; i < len(jobs)-keep; i++ {
		job := &jobs[i]
		if !jobFinished(job) {
			continue
		}
		logf.FromContext(ctx).Info("Deleting old backup run", "job", job.Name, "retention", keep)
		err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		r.event(backup, job, corev1.EventTypeNormal, "BackupPruned", "Prune",
			"Deleted backup job %s (retention %d)", job.Name, keep)
	}
	return nil
}

func (r *BackupReconciler) setInProgress(backup *databasev1.Backup, job *batchv1.Job) {
	backup.Status.Phase = databasev1.BackupPhaseInProgress
	r.setCondition(backup, metav1.ConditionFalse, databasev1.ReasonBackupInProgress, fmt.Sprintf("Backup job %s is running", job.Name))
}

// setFinished reports the outcome of a finished run. A failed run keeps the
// time and location of the last successful backup, which is still there.
func (r *BackupReconciler) setFinished(ctx context.Context, backup *databasev1.Backup, job *batchv1.Job) {
	log := logf.FromContext(ctx)
	if failed := jobCondition(job, batchv1.JobFailed); failed != nil {
		message := fmt.Sprintf("Backup job %s failed", job.Name)
		if failed.Reason != "" || failed.Message != "" {
			message = fmt.Sprintf("%s: %s: %s", message, failed.Reason, failed.Message)
		}
		if backup.Status.Phase != databasev1.BackupPhaseFailed || !r.conditionReasonIs(backup, databasev1.ReasonBackupFailed) {
			log.Info("Backup failed", "job", job.Name, "message", message)
			r.event(backup, job, corev1.EventTypeWarning, databasev1.ReasonBackupFailed, "Backup", "%s", message)
		}
		backup.Status.Phase = databasev1.BackupPhaseFailed
		r.setCondition(backup, metav1.ConditionFalse, databasev1.ReasonBackupFailed, message)
		return
	}
	completed := jobCondition(job, batchv1.JobComplete)
	finishedAt := completed.LastTransitionTime
	if job.Status.CompletionTime != nil {
		finishedAt = *job.Status.CompletionTime
	}
	location := job.Annotations[annotationLocation]
	if backup.Status.Phase != databasev1.BackupPhaseCompleted || backup.Status.BackupLocation != location {
		log.Info("Backup completed", "job", job.Name, "location", location)
		r.event(backup, job, corev1.EventTypeNormal, databasev1.ReasonBackupCompleted, "Backup",
			"Backup completed successfully: %s", location)
	}
	backup.Status.Phase = databasev1.BackupPhaseCompleted
	backup.Status.BackupTime = &finishedAt
	backup.Status.BackupLocation = location
	r.setCondition(backup, metav1.ConditionTrue, databasev1.ReasonBackupCompleted, "Backup completed successfully")
}

// backupsForDatabase maps a Database event to the Backups of that Database,
// through the databaseRefField index.
func (r *BackupReconciler) backupsForDatabase(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &databasev1.BackupList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{databaseRefField: obj.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "Listing the Backups of a Database", "database", obj.GetName())
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for _, backup := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&backup)})
	}
	return requests
}

// SetupWithManager sets up the controller with the Manager: Backups, their run
// Jobs, and the Databases they wait for (no polling).
func (r *BackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &databasev1.Backup{}, databaseRefField,
		func(obj client.Object) []string {
			name := obj.(*databasev1.Backup).Spec.DatabaseRef.Name
			if name == "" {
				return nil
			}
			return []string{name}
		}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&databasev1.Backup{}).
		Owns(&batchv1.Job{}).
		Watches(&databasev1.Database{}, handler.EnqueueRequestsFromMapFunc(r.backupsForDatabase)).
		Named("backup").
		Complete(r)
}

// updateStatus writes the status when it changed, with a merge patch that
// carries base's resourceVersion, so a pass that read a stale cache cannot
// mix its fields into a newer status. A conflict means the newer Backup is
// already on its way through the watch, which reconciles it again; nothing is
// retried here and nothing is announced. Entering or changing a Pending
// reason is announced with an event once written; the other transitions have
// theirs where they happen (BackupStarted, BackupCompleted, BackupFailed).
func (r *BackupReconciler) updateStatus(ctx context.Context, base, backup *databasev1.Backup) error {
	if equality.Semantic.DeepEqual(base.Status, backup.Status) {
		return nil
	}
	err := r.Status().Patch(ctx, backup, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return err
	}
	before := meta.FindStatusCondition(base.Status.Conditions, databasev1.ConditionBackupReady)
	after := meta.FindStatusCondition(backup.Status.Conditions, databasev1.ConditionBackupReady)
	if base.Status.Phase != backup.Status.Phase {
		logf.FromContext(ctx).Info("Backup phase changed", "from", base.Status.Phase, "to", backup.Status.Phase)
	}
	if after != nil && (backup.Status.Phase == databasev1.BackupPhasePending || after.Reason == databasev1.ReasonInvalidSchedule) &&
		(base.Status.Phase != backup.Status.Phase || before == nil || before.Reason != after.Reason) {
		eventType := corev1.EventTypeNormal
		if after.Reason == databasev1.ReasonInvalidSchedule {
			eventType = corev1.EventTypeWarning
		}
		r.event(backup, nil, eventType, after.Reason, "Backup", "%s", after.Message)
	}
	return nil
}

func (r *BackupReconciler) setCondition(backup *databasev1.Backup, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&backup.Status.Conditions, metav1.Condition{
		Type:               databasev1.ConditionBackupReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: backup.Generation,
	})
}

func (r *BackupReconciler) conditionReasonIs(backup *databasev1.Backup, reason string) bool {
	c := meta.FindStatusCondition(backup.Status.Conditions, databasev1.ConditionBackupReady)
	return c != nil && c.Reason == reason
}

func (r *BackupReconciler) event(regarding, related runtime.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, related, eventType, reason, action, note, args...)
	}
}

func (r *BackupReconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

func (r *BackupReconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock.Now()
	}
	return time.Now()
}

// parseSchedule parses a standard 5-field cron expression (or a descriptor such
// as @daily). Times are UTC unless the expression starts with CRON_TZ=<zone>.
func parseSchedule(spec string) (cron.Schedule, error) {
	schedule, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, err
	}
	if s, ok := schedule.(*cron.SpecSchedule); ok && !strings.HasPrefix(spec, "CRON_TZ=") && !strings.HasPrefix(spec, "TZ=") {
		s.Location = time.UTC
	}
	return schedule, nil
}

func jobCondition(job *batchv1.Job, conditionType batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		if c.Type == conditionType && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// jobFinished is true once the Job reached a terminal condition.
func jobFinished(job *batchv1.Job) bool {
	return jobCondition(job, batchv1.JobComplete) != nil || jobCondition(job, batchv1.JobFailed) != nil
}

// scheduledTime is the time a run was scheduled for (its creation time when
// the annotation is missing or unreadable).
func scheduledTime(job *batchv1.Job) time.Time {
	if t, err := time.Parse(time.RFC3339, job.Annotations[annotationScheduled]); err == nil {
		return t
	}
	return job.CreationTimestamp.UTC()
}

func retention(backup *databasev1.Backup) int {
	if backup.Spec.Retention < 1 {
		return defaultBackupRetains
	}
	return backup.Spec.Retention
}

func runLabels(backup *databasev1.Backup, db *databasev1.Database) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "postgres-backup",
		"app.kubernetes.io/managed-by": "postgres-operator",
		labelBackup:                    labelValue(backup.Name),
		labelBackupUID:                 string(backup.UID),
		labelDatabase:                  labelValue(db.Name),
	}
}

// backupVolumeClaimName is the PVC that holds a Backup's dumps.
func backupVolumeClaimName(backup *databasev1.Backup) string {
	return backup.Name + "-storage"
}

// runJobName is <backup>-<YYYYMMDD-HHMMSS>, shortened with a hash to the 63
// characters a Job name may have (it becomes a label value on its Pods).
func runJobName(backup, stamp string) string {
	const maxLen = 63
	suffix := "-" + stamp
	if len(backup)+len(suffix) <= maxLen {
		return backup + suffix
	}
	sum := sha256.Sum256([]byte(backup))
	hash := hex.EncodeToString(sum[:])[:8]
	keep := maxLen - len(suffix) - len(hash) - 1
	return backup[:keep] + "-" + hash + suffix
}

// labelValue shortens a name to a valid label value (63 characters).
func labelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:54] + "-" + hex.EncodeToString(sum[:])[:8]
}
