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

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
