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

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

// Unit specs: pure functions, no client. Specs that need a state the running
// controllers would overwrite run against the API server in isolatedNamespace
// (see database_controller_test.go).
var _ = Describe("Unit", func() {
	Context("statefulSetDrift compares values, not pointers (course bug B1)", func() {
		r := &DatabaseReconciler{}
		build := func() *appsv1.StatefulSet {
			r.Scheme = testScheme
			db := &databasev1.Database{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d", UID: "uid-1"},
				Spec: databasev1.DatabaseSpec{Image: "postgres:14", Replicas: ptr.To[int32](2),
					DatabaseName: "x", Username: "y", Storage: databasev1.StorageSpec{Size: "1Gi"}},
			}
			sts, err := r.desiredStatefulSet(db)
			Expect(err).NotTo(HaveOccurred())
			return sts
		}

		It("sees no change between equal values behind different pointers", func() {
			existing, desired := build(), build()
			existing.Spec.Replicas = ptr.To[int32](2)
			Expect(existing.Spec.Replicas).NotTo(BeIdenticalTo(desired.Spec.Replicas))
			replicas, other := statefulSetDrift(existing, desired)
			Expect(replicas).To(BeFalse())
			Expect(other).To(BeFalse())
		})

		It("tells a replicas-only change from other changes", func() {
			existing, desired := build(), build()
			existing.Spec.Replicas = ptr.To[int32](5)
			replicas, other := statefulSetDrift(existing, desired)
			Expect(replicas).To(BeTrue())
			Expect(other).To(BeFalse())

			existing.Spec.Template.Spec.Containers[0].Image = "postgres:13"
			replicas, other = statefulSetDrift(existing, desired)
			Expect(replicas).To(BeTrue())
			Expect(other).To(BeTrue())
		})

		It("ignores fields the API server defaults", func() {
			existing, desired := build(), build()
			c := &existing.Spec.Template.Spec.Containers[0]
			c.TerminationMessagePath = corev1.TerminationMessagePathDefault
			c.ImagePullPolicy = corev1.PullIfNotPresent
			existing.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
			_, other := statefulSetDrift(existing, desired)
			Expect(other).To(BeFalse())
		})
	})

	Context("backup schedule", func() {
		r := &BackupReconciler{}
		at := func(hhmm string) time.Time {
			t, err := time.Parse("2006-01-02 15:04", "2026-03-01 "+hhmm)
			Expect(err).NotTo(HaveOccurred())
			return t
		}
		runAt := func(t time.Time) *batchv1.Job {
			return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
				annotationScheduled: t.Format(time.RFC3339)}}}
		}
		scheduled := func(schedule string) *databasev1.Backup {
			return &databasev1.Backup{Spec: databasev1.BackupSpec{Schedule: schedule}}
		}

		It("runs a one-off backup once", func() {
			due, _, next, err := r.nextRun(scheduled(""), nil, at("10:00"))
			Expect(err).NotTo(HaveOccurred())
			Expect(due).To(BeTrue())
			Expect(next.IsZero()).To(BeTrue())
			due, _, _, _ = r.nextRun(scheduled(""), runAt(at("10:00")), at("11:00"))
			Expect(due).To(BeFalse())
			done := scheduled("")
			done.Status.Phase = databasev1.BackupPhaseCompleted
			due, _, _, _ = r.nextRun(done, nil, at("11:00"))
			Expect(due).To(BeFalse(), "a recorded result whose Job was deleted does not run again")
		})

		It("runs first immediately, then at each cron time, once for several missed times", func() {
			b := scheduled("0 2 * * *")
			due, when, next, err := r.nextRun(b, nil, at("10:17"))
			Expect(err).NotTo(HaveOccurred())
			Expect(due).To(BeTrue())
			Expect(when).To(Equal(at("10:17")))
			Expect(next).To(Equal(at("02:00").Add(24 * time.Hour)))

			due, _, next, _ = r.nextRun(b, runAt(at("10:17")), at("23:59"))
			Expect(due).To(BeFalse())
			Expect(next).To(Equal(at("02:00").Add(24 * time.Hour)))

			due, when, _, _ = r.nextRun(b, runAt(at("10:17")), at("10:17").Add(72*time.Hour))
			Expect(due).To(BeTrue())
			Expect(when).To(Equal(at("02:00").Add(72 * time.Hour)))
		})

		It("rejects an invalid schedule", func() {
			_, _, _, err := r.nextRun(scheduled("every day"), nil, at("10:00"))
			Expect(err).To(HaveOccurred())
		})

		It("keeps Job names within 63 characters", func() {
			long := strings.Repeat("b", 100)
			name := runJobName(long, "20260301-103000")
			Expect(len(name)).To(BeNumerically("<=", 63))
			Expect(name).To(HaveSuffix("-20260301-103000"))
			Expect(runJobName(long, "20260301-103000")).To(Equal(name))
			Expect(runJobName(long+"c", "20260301-103000")).NotTo(Equal(name))
			Expect(runJobName("short", "20260301-103000")).To(Equal("short-20260301-103000"))
			Expect(len(labelValue(long))).To(BeNumerically("<=", 63))
		})
	})
})
