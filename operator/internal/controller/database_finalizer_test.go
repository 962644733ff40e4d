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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

var _ = Describe("Database finalizer and phases", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	gone := func(obj client.Object, name string) func(Gomega) {
		return func(g Gomega) {
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s still exists", obj, name)
		}
	}

	It("passes through every phase in order to Ready", func() {
		watcher, err := client.NewWithWatch(cfg, client.Options{Scheme: testScheme})
		Expect(err).NotTo(HaveOccurred())
		w, err := watcher.Watch(ctx, &databasev1.DatabaseList{}, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()

		makeDatabaseReady(ns, "machine")
		var phases []databasev1.DatabasePhase
		Eventually(func(g Gomega) {
			for {
				select {
				case ev := <-w.ResultChan():
					if db, ok := ev.Object.(*databasev1.Database); ok {
						p := db.Status.Phase
						if p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
							phases = append(phases, p)
						}
					}
					continue
				default:
				}
				break
			}
			g.Expect(phases).To(Equal([]databasev1.DatabasePhase{
				databasev1.DatabasePhaseProvisioning, databasev1.DatabasePhaseConfiguring,
				databasev1.DatabasePhaseDeploying, databasev1.DatabasePhaseVerifying, databasev1.DatabasePhaseReady,
			}))
		}, reactionTimeout, pollInterval).Should(Succeed())
	})

	It("goes back through Provisioning when its StatefulSet is deleted while Ready", func() {
		makeDatabaseReady(ns, "lost")
		old := getStatefulSet(Default, ns, "lost")
		Expect(k8sClient.Delete(ctx, old)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getStatefulSet(g, ns, "lost").UID).NotTo(Equal(old.UID))
		}, reactionTimeout, pollInterval).Should(Succeed())
		setStatefulSetReady(ns, "lost", 1)
		Eventually(func(g Gomega) {
			g.Expect(getDatabase(g, ns, "lost").Status.Phase).To(Equal(databasev1.DatabasePhaseReady))
		}, reactionTimeout, pollInterval).Should(Succeed())
	})

	It("adds its finalizer and cleans up before the Database goes", func() {
		makeDatabaseReady(ns, "final")
		Expect(getDatabase(Default, ns, "final").Finalizers).To(ContainElement(databasev1.DatabaseFinalizer))

		// envtest runs no garbage collector: only the operator's cleanup
		// can remove the children.
		Expect(k8sClient.Delete(ctx, getDatabase(Default, ns, "final"))).To(Succeed())
		Eventually(gone(&databasev1.Database{}, "final"), reactionTimeout, pollInterval).Should(Succeed())
		Eventually(gone(&appsv1.StatefulSet{}, "final")).Should(Succeed())
		Eventually(gone(&corev1.Service{}, "final")).Should(Succeed())
		Eventually(gone(&corev1.Secret{}, "final-credentials")).Should(Succeed())
	})

	It("reports CleanupFailed while a child cannot be deleted, and finishes once it can", func() {
		const hold = "test.example.com/hold"
		makeDatabaseReady(ns, "held")
		Eventually(func(g Gomega) {
			sts := getStatefulSet(g, ns, "held")
			sts.Finalizers = append(sts.Finalizers, hold)
			g.Expect(k8sClient.Update(ctx, sts)).To(Succeed())
		}).Should(Succeed())

		Expect(k8sClient.Delete(ctx, getDatabase(Default, ns, "held"))).To(Succeed())
		Eventually(func(g Gomega) {
			db := getDatabase(g, ns, "held")
			g.Expect(db.DeletionTimestamp).NotTo(BeNil())
			g.Expect(db.Finalizers).To(ContainElement(databasev1.DatabaseFinalizer))
			ready := condition(db.Status.Conditions, databasev1.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(databasev1.ReasonCleanupFailed))
			g.Expect(ready.Message).To(ContainSubstring("StatefulSet held"))
		}, reactionTimeout, pollInterval).Should(Succeed())
		Eventually(gone(&corev1.Service{}, "held")).Should(Succeed())
		Eventually(gone(&corev1.Secret{}, "held-credentials")).Should(Succeed())

		Eventually(func(g Gomega) {
			sts := getStatefulSet(g, ns, "held")
			sts.Finalizers = nil
			g.Expect(k8sClient.Update(ctx, sts)).To(Succeed())
		}).Should(Succeed())
		Eventually(gone(&databasev1.Database{}, "held"), 2*cleanupRetry+reactionTimeout, pollInterval).Should(Succeed())
	})

	// Lab 6.4: Deleting when the cleanup starts, Deleted when it is done,
	// each once, however many passes the cleanup takes. isolatedNamespace:
	// no manager reconciles it, so every pass and every event is this
	// spec's own.
	Context("announces its deletion", func() {
		var (
			recorder *events.FakeRecorder
			r        *DatabaseReconciler
		)
		BeforeEach(func() {
			recorder = events.NewFakeRecorder(20)
			r = &DatabaseReconciler{Client: k8sClient, Scheme: testScheme, Recorder: recorder, APIReader: k8sClient}
		})
		reconcileTimes := func(db *databasev1.Database, n int) {
			for range n {
				_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(db)})
				Expect(err).NotTo(HaveOccurred())
			}
		}
		received := func() []string {
			var got []string
			for len(recorder.Events) > 0 {
				got = append(got, <-recorder.Events)
			}
			return got
		}
		deleting := "Normal Deleting " + deletingMessage
		deleted := "Normal Deleted Deleted the StatefulSet, the Service and the Secret; finalizer removed"

		It("in the pass that finishes the cleanup, Deleting then Deleted", func() {
			db := newDatabase(isolatedNamespace, "", func(db *databasev1.Database) { db.GenerateName = "quick-" })
			reconcileTimes(db, 3) // the finalizer, then the Secret, the StatefulSet and the Service
			Expect(getStatefulSet(Default, isolatedNamespace, db.Name)).NotTo(BeNil())
			_ = received()

			Expect(k8sClient.Delete(ctx, db)).To(Succeed())
			reconcileTimes(db, 3)
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(db), &databasev1.Database{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Database is still there: %v", err)
			Expect(received()).To(Equal([]string{deleting, deleted}))
		})

		It("over many passes, Deleting once when it starts and Deleted once when it ends", func() {
			const hold = "test.example.com/hold"
			db := newDatabase(isolatedNamespace, "", func(db *databasev1.Database) { db.GenerateName = "slow-" })
			reconcileTimes(db, 3)
			sts := getStatefulSet(Default, isolatedNamespace, db.Name)
			sts.Finalizers = append(sts.Finalizers, hold)
			Expect(k8sClient.Update(ctx, sts)).To(Succeed())
			_ = received()

			Expect(k8sClient.Delete(ctx, db)).To(Succeed())
			reconcileTimes(db, 3)
			Expect(received()).To(Equal([]string{deleting}), "one event when the cleanup starts, not one per pass")

			sts = getStatefulSet(Default, isolatedNamespace, db.Name)
			sts.Finalizers = nil
			Expect(k8sClient.Update(ctx, sts)).To(Succeed())
			reconcileTimes(db, 2)
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(db), &databasev1.Database{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Database is still there: %v", err)
			Expect(received()).To(Equal([]string{deleted}))
		})
	})
})
