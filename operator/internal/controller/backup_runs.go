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
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	databasev1 "github.com/example/postgres-operator/api/v1"
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
