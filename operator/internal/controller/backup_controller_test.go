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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

func backupReady(backup *databasev1.Backup) metav1.Condition {
	return condition(backup.Status.Conditions, databasev1.ConditionBackupReady)
}

var _ = Describe("Backup controller", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("stays Pending while the Database is missing or not Ready, then starts through the Database watch", func() {
		backup := newBackup(ns, "early", "later-db")
		Eventually(func(g Gomega) {
			b := getBackup(g, ns, "early")
			g.Expect(b.Status.Phase).To(Equal(databasev1.BackupPhasePending))
			g.Expect(backupReady(b).Status).To(Equal(metav1.ConditionFalse))
			g.Expect(backupReady(b).Reason).To(Equal(databasev1.ReasonDatabaseNotFound))
		}).Should(Succeed())

		By("the Database appearing, not Ready yet")
		newDatabase(ns, "later-db")
		Eventually(func(g Gomega) {
			b := getBackup(g, ns, "early")
			g.Expect(b.Status.Phase).To(Equal(databasev1.BackupPhasePending))
			g.Expect(backupReady(b).Reason).To(Equal(databasev1.ReasonDatabaseNotReady))
		}, reactionTimeout, pollInterval).Should(Succeed())
		Expect(runJobs(Default, backup)).To(BeEmpty())

		By("the Database becoming Ready: the backup starts within the reaction timeout")
		Eventually(func(g Gomega) { getStatefulSet(g, ns, "later-db") }).Should(Succeed())
		setStatefulSetReady(ns, "later-db", 1)
		waitForRunJob(backup, 1, reactionTimeout)
		Eventually(func(g Gomega) {
			b := getBackup(g, ns, "early")
			g.Expect(b.Status.Phase).To(Equal(databasev1.BackupPhaseInProgress))
			g.Expect(backupReady(b).Reason).To(Equal(databasev1.ReasonBackupInProgress))
		}, reactionTimeout, pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(eventReasons(g, ns, "early")).To(ContainElements(databasev1.ReasonDatabaseNotFound, databasev1.ReasonDatabaseNotReady, "BackupStarted"))
		}).Should(Succeed())
	})

	It("writes no status and announces nothing from a stale read: the conflict is left to the watch", func() {
		newBackup(ns, "stale", "missing-db")
		var stale *databasev1.Backup
		Eventually(func(g Gomega) {
			stale = getBackup(g, ns, "stale")
			g.Expect(backupReady(stale).Reason).To(Equal(databasev1.ReasonDatabaseNotFound))
		}).Should(Succeed())

		By("a newer Backup written meanwhile")
		var newer string
		Eventually(func(g Gomega) {
			fresh := getBackup(g, ns, "stale")
			fresh.Annotations = map[string]string{"someone": "else"}
			g.Expect(k8sClient.Update(ctx, fresh)).To(Succeed())
			newer = fresh.ResourceVersion
		}).Should(Succeed())

		By("a pass that read the older one moving to a new Pending reason")
		recorder := events.NewFakeRecorder(10)
		r := &BackupReconciler{Client: k8sClient, Scheme: testScheme, Recorder: recorder}
		backup := stale.DeepCopy()
		r.setCondition(backup, metav1.ConditionFalse, databasev1.ReasonDatabaseNotReady, "stale")
		Expect(r.updateStatus(ctx, stale, backup)).To(Succeed(), "a conflict is not an error: the watch brings the newer Backup")

		// The Database stays missing, so the manager writes nothing more: a
		// status written from the stale read would show as a new
		// resourceVersion.
		got := getBackup(Default, ns, "stale")
		Expect(got.ResourceVersion).To(Equal(newer), "the stale pass wrote the status")
		Expect(backupReady(got).Reason).To(Equal(databasev1.ReasonDatabaseNotFound))
		Expect(recorder.Events).To(BeEmpty(), "an event announced a status that was never written")
	})

	It("runs pg_dump in a Job from the Database's image against its Service, into a PVC it owns", func() {
		db := makeDatabaseReady(ns, "shop", func(db *databasev1.Database) {
			db.Spec.Image = "postgres:15"
			db.Spec.Storage = databasev1.StorageSpec{Size: "2Gi", StorageClass: "fast"}
		})
		backup := newBackup(ns, "shop-backup", "shop", func(b *databasev1.Backup) { b.Spec.Retention = 3 })
		job := waitForRunJob(backup, 1)
		backup = getBackup(Default, ns, "shop-backup")

		Expect(metav1.IsControlledBy(job, backup)).To(BeTrue(), "the Job is owned by the Backup")
		Expect(job.Name).To(HavePrefix("shop-backup-"))
		Expect(job.Spec.BackoffLimit).To(Equal(ptr.To[int32](backupJobBackoff)))
		pod := job.Spec.Template.Spec
		Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
		Expect(pod.Containers).To(HaveLen(1))
		c := pod.Containers[0]
		Expect(c.Image).To(Equal("postgres:15"))
		Expect(strings.Join(c.Command, " ")).To(ContainSubstring("pg_dump"))
		Expect(strings.Join(c.Command, " ")).To(ContainSubstring(`--host="${PGHOST}" --port="${PGPORT}"`))
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
		}
		// Host and port apart (course bug B25 passed "host:5432" as the host).
		Expect(env["PGHOST"].Value).To(Equal("shop"))
		Expect(env["PGPORT"].Value).To(Equal("5432"))
		for name, key := range map[string]string{"PGPASSWORD": "password", "PGUSER": "username", "PGDATABASE": "database"} {
			Expect(env[name].ValueFrom).NotTo(BeNil(), name)
			Expect(env[name].ValueFrom.SecretKeyRef.Name).To(Equal(db.Status.SecretName), name)
			Expect(env[name].ValueFrom.SecretKeyRef.Key).To(Equal(key), name)
		}
		Expect(env["BACKUP_RETAIN"].Value).To(Equal("3"))
		Expect(env["BACKUP_FILE"].Value).To(MatchRegexp(`^/backup/shop-\d{8}-\d{6}\.sql$`))
		Expect(c.VolumeMounts).To(ConsistOf(corev1.VolumeMount{Name: "backup", MountPath: "/backup"}))
		Expect(pod.Volumes).To(HaveLen(1))
		Expect(pod.Volumes[0].PersistentVolumeClaim).NotTo(BeNil())
		Expect(pod.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("shop-backup-storage"))

		pvc := &corev1.PersistentVolumeClaim{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-backup-storage"}, pvc)).To(Succeed())
		Expect(metav1.IsControlledBy(pvc, backup)).To(BeTrue(), "the PVC is owned by the Backup")
		Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("2Gi"))
		Expect(pvc.Spec.StorageClassName).To(Equal(ptr.To("fast")))
		Expect(pvc.Spec.AccessModes).To(ConsistOf(corev1.ReadWriteOnce))

		Eventually(func(g Gomega) {
			b := getBackup(g, ns, "shop-backup")
			g.Expect(b.Status.Phase).To(Equal(databasev1.BackupPhaseInProgress))
			g.Expect(backupReady(b).Status).To(Equal(metav1.ConditionFalse))
		}).Should(Succeed())
	})

	It("completes with BackupReady=True, the backup time and location when the Job succeeds", func() {
		makeDatabaseReady(ns, "orders")
		backup := newBackup(ns, "orders-backup", "orders")
		job := waitForRunJob(backup, 1)
		completeJob(job)
		Eventually(func(g Gomega) {
			b := getBackup(g, ns, "orders-backup")
			g.Expect(b.Status.Phase).To(Equal(databasev1.BackupPhaseCompleted))
			ready := backupReady(b)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(ready.Reason).To(Equal(databasev1.ReasonBackupCompleted))
			g.Expect(ready.Message).To(Equal("Backup completed successfully"))
			g.Expect(b.Status.BackupTime).NotTo(BeNil())
			file := strings.TrimPrefix(envValue(job, "BACKUP_FILE"), "/backup/")
			g.Expect(b.Status.BackupLocation).To(Equal("pvc://orders-backup-storage/" + file))
		}, reactionTimeout, pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(eventReasons(g, ns, "orders-backup")).To(ContainElements("BackupStarted", databasev1.ReasonBackupCompleted))
		}).Should(Succeed())

		By("a one-off backup does not run again")
		poke(backup)
		Consistently(func(g Gomega) { g.Expect(runJobs(g, backup)).To(HaveLen(1)) }).Should(Succeed())
	})

	It("fails with reason BackupFailed and the Job's failure, without retrying in a loop", func() {
		makeDatabaseReady(ns, "broken")
		backup := newBackup(ns, "broken-backup", "broken")
		job := waitForRunJob(backup, 1)
		failJob(job, "Job has reached the specified backoff limit")
		Eventually(func(g Gomega) {
			b := getBackup(g, ns, "broken-backup")
			g.Expect(b.Status.Phase).To(Equal(databasev1.BackupPhaseFailed))
			ready := backupReady(b)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(databasev1.ReasonBackupFailed))
			g.Expect(ready.Message).To(ContainSubstring("Job has reached the specified backoff limit"))
			g.Expect(ready.Message).To(ContainSubstring(job.Name))
		}, reactionTimeout, pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(eventReasons(g, ns, "broken-backup")).To(ContainElement(databasev1.ReasonBackupFailed))
		}).Should(Succeed())

		poke(backup)
		Consistently(func(g Gomega) {
			g.Expect(runJobs(g, backup)).To(HaveLen(1))
			g.Expect(getBackup(g, ns, "broken-backup").Status.Phase).To(Equal(databasev1.BackupPhaseFailed))
		}).Should(Succeed())
	})

	It("resumes from the existing Job after a manager restart", func() {
		makeDatabaseReady(ns, "crashy")
		backup := newBackup(ns, "crashy-backup", "crashy")
		first := waitForRunJob(backup, 1)
		Eventually(func(g Gomega) {
			g.Expect(getBackup(g, ns, "crashy-backup").Status.Phase).To(Equal(databasev1.BackupPhaseInProgress))
		}).Should(Succeed())

		By("stopping the manager mid-backup; the Job finishes while it is down")
		running.stop()
		completeJob(first)

		By("starting a new manager")
		running = startManager()
		Eventually(func(g Gomega) {
			b := getBackup(g, ns, "crashy-backup")
			g.Expect(b.Status.Phase).To(Equal(databasev1.BackupPhaseCompleted))
			g.Expect(backupReady(b).Reason).To(Equal(databasev1.ReasonBackupCompleted))
		}).Should(Succeed())
		jobs := runJobs(Default, backup)
		Expect(jobs).To(HaveLen(1))
		Expect(jobs[0].UID).To(Equal(first.UID), "the run was resumed, not started again")

		By("a restart while the Job is still running keeps waiting for that Job")
		other := newBackup(ns, "crashy-backup-2", "crashy")
		running.stop()
		running = startManager()
		second := waitForRunJob(other, 1)
		running.stop()
		running = startManager()
		Eventually(func(g Gomega) {
			g.Expect(getBackup(g, ns, "crashy-backup-2").Status.Phase).To(Equal(databasev1.BackupPhaseInProgress))
		}).Should(Succeed())
		Expect(runJobs(Default, other)).To(HaveLen(1))
		completeJob(second)
		Eventually(func(g Gomega) {
			g.Expect(getBackup(g, ns, "crashy-backup-2").Status.Phase).To(Equal(databasev1.BackupPhaseCompleted))
		}, reactionTimeout, pollInterval).Should(Succeed())
	})

	It("runs again at each cron time and keeps only the newest retention runs", func() {
		start := time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)
		fakeClock.SetTime(start)
		makeDatabaseReady(ns, "hourly")
		backup := newBackup(ns, "hourly-backup", "hourly", func(b *databasev1.Backup) {
			b.Spec.Schedule = "0 * * * *"
			b.Spec.Retention = 2
		})

		By("the first run starts as soon as the Database is Ready")
		job := waitForRunJob(backup, 1)
		Expect(job.Name).To(Equal("hourly-backup-20260301-103000"))
		completeJob(job)
		Eventually(func(g Gomega) {
			g.Expect(getBackup(g, ns, "hourly-backup").Status.Phase).To(Equal(databasev1.BackupPhaseCompleted))
		}).Should(Succeed())

		By("before the next cron time nothing runs")
		fakeClock.SetTime(start.Add(20 * time.Minute))
		poke(backup)
		Consistently(func(g Gomega) { g.Expect(runJobs(g, backup)).To(HaveLen(1)) }).Should(Succeed())

		expected := []string{"hourly-backup-20260301-103000"}
		for i, at := range []time.Time{
			time.Date(2026, 3, 1, 11, 0, 30, 0, time.UTC),
			time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC),
			// Three hours late: one run for the latest missed time, not three.
			time.Date(2026, 3, 1, 15, 10, 0, 0, time.UTC),
		} {
			By("the clock passing " + at.Format(time.Kitchen))
			fakeClock.SetTime(at)
			poke(backup)
			name := "hourly-backup-" + at.Truncate(time.Hour).Format(backupTimeFormat)
			expected = append(expected, name)
			var newest batchv1.Job
			Eventually(func(g Gomega) {
				jobs := runJobs(g, backup)
				g.Expect(jobs).NotTo(BeEmpty())
				newest = jobs[len(jobs)-1]
				g.Expect(newest.Name).To(Equal(name))
			}).Should(Succeed(), "run %d", i+2)
			completeJob(&newest)
			Eventually(func(g Gomega) {
				b := getBackup(g, ns, "hourly-backup")
				g.Expect(b.Status.Phase).To(Equal(databasev1.BackupPhaseCompleted))
				g.Expect(b.Status.BackupLocation).To(HaveSuffix(at.Truncate(time.Hour).Format(backupTimeFormat) + ".sql"))
				names := []string{}
				for _, j := range runJobs(g, backup) {
					names = append(names, j.Name)
				}
				keep := expected
				if len(keep) > 2 {
					keep = keep[len(keep)-2:]
				}
				g.Expect(names).To(Equal(keep), "only the newest 2 runs are kept")
			}).Should(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(eventReasons(g, ns, "hourly-backup")).To(ContainElement("BackupPruned"))
		}).Should(Succeed())
	})

	It("reports an invalid schedule", func() {
		newBackup(ns, "bad-schedule", "nothing", func(b *databasev1.Backup) { b.Spec.Schedule = "every day" })
		Eventually(func(g Gomega) {
			b := getBackup(g, ns, "bad-schedule")
			g.Expect(b.Status.Phase).To(Equal(databasev1.BackupPhaseFailed))
			g.Expect(backupReady(b).Reason).To(Equal(databasev1.ReasonInvalidSchedule))
		}).Should(Succeed())
	})

	It("defaults retention to 5 and rejects a retention below 1", func() {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("database.example.com/v1")
		u.SetKind("Backup")
		u.SetNamespace(ns)
		u.SetName("defaulted")
		Expect(unstructured.SetNestedMap(u.Object, map[string]any{
			"databaseRef": map[string]any{"name": "x"},
		}, "spec")).To(Succeed())
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		Expect(getBackup(Default, ns, "defaulted").Spec.Retention).To(Equal(5))

		Expect(unstructured.SetNestedField(u.Object, int64(0), "spec", "retention")).To(Succeed())
		u.SetName("zero")
		u.SetResourceVersion("")
		err := k8sClient.Create(ctx, u)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.retention"))
	})
})

func envValue(job *batchv1.Job, name string) string {
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
