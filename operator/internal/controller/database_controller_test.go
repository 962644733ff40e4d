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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

const mergePatch = "patch:" + string(types.MergePatchType)

func expectControlledBy(obj metav1.Object, db *databasev1.Database) {
	ref := metav1.GetControllerOf(obj)
	ExpectWithOffset(1, ref).NotTo(BeNil(), "%s has no controller owner reference", obj.GetName())
	ExpectWithOffset(1, ref.Kind).To(Equal("Database"))
	ExpectWithOffset(1, ref.Name).To(Equal(db.Name))
	ExpectWithOffset(1, ref.UID).To(Equal(db.UID))
	ExpectWithOffset(1, ref.BlockOwnerDeletion).To(Equal(ptr.To(true)))
}

func condition(conditions []metav1.Condition, conditionType string) metav1.Condition {
	c := meta.FindStatusCondition(conditions, conditionType)
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

// conflictCountingClient counts the updates the API server refused with a conflict.
type conflictCountingClient struct {
	client.Client
	conflicts int
}

func (c *conflictCountingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	if apierrors.IsConflict(err) {
		c.conflicts++
	}
	return err
}

var _ = Describe("Database controller", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	Context("children", func() {
		It("creates the Secret, StatefulSet and Service with controller owner references", func() {
			db := newDatabase(ns, "my-database", func(db *databasev1.Database) {
				db.Spec.Storage = databasev1.StorageSpec{Size: "10Gi", StorageClass: "fast"}
				db.Spec.Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				}
			})

			secret := &corev1.Secret{}
			Eventually(func() error {
				return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-database-credentials"}, secret)
			}).Should(Succeed())
			expectControlledBy(secret, db)
			Expect(secret.Type).To(Equal(corev1.SecretTypeOpaque))
			Expect(string(secret.Data["username"])).To(Equal("admin"))
			Expect(string(secret.Data["database"])).To(Equal("mydb"))
			Expect(string(secret.Data["password"])).To(MatchRegexp(`^[A-Za-z0-9_-]{16}$`))

			var sts *appsv1.StatefulSet
			Eventually(func(g Gomega) { sts = getStatefulSet(g, ns, "my-database") }).Should(Succeed())
			expectControlledBy(sts, db)
			Expect(*sts.Spec.Replicas).To(Equal(int32(1)))
			labels := map[string]string{"app": "database", "database": "my-database"}
			Expect(sts.Spec.Selector.MatchLabels).To(Equal(labels))
			Expect(sts.Spec.Template.Labels).To(Equal(labels))
			Expect(sts.Spec.Template.Spec.Containers).To(HaveLen(1))
			c := sts.Spec.Template.Spec.Containers[0]
			Expect(c.Name).To(Equal("postgres"))
			Expect(c.Image).To(Equal("postgres:14"))
			Expect(c.Ports).To(ConsistOf(HaveField("ContainerPort", int32(5432))))
			Expect(c.Resources.Requests.Memory().String()).To(Equal("256Mi"))
			secretKey := func(key string) *corev1.EnvVarSource {
				return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "my-database-credentials"}, Key: key}}
			}
			Expect(c.Env).To(ConsistOf(
				corev1.EnvVar{Name: "POSTGRES_DB", ValueFrom: secretKey("database")},
				corev1.EnvVar{Name: "POSTGRES_USER", ValueFrom: secretKey("username")},
				corev1.EnvVar{Name: "POSTGRES_PASSWORD", ValueFrom: secretKey("password")},
				corev1.EnvVar{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"},
			))
			Expect(c.VolumeMounts).To(ConsistOf(corev1.VolumeMount{Name: "data", MountPath: "/var/lib/postgresql/data"}))
			Expect(sts.Spec.VolumeClaimTemplates).To(HaveLen(1))
			claim := sts.Spec.VolumeClaimTemplates[0]
			Expect(claim.Name).To(Equal("data"))
			Expect(claim.Spec.AccessModes).To(ConsistOf(corev1.ReadWriteOnce))
			Expect(claim.Spec.Resources.Requests.Storage().String()).To(Equal("10Gi"))
			Expect(claim.Spec.StorageClassName).To(Equal(ptr.To("fast")))

			svc := &corev1.Service{}
			Eventually(func() error {
				return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-database"}, svc)
			}).Should(Succeed())
			expectControlledBy(svc, db)
			Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
			Expect(svc.Spec.Selector).To(Equal(labels))
			Expect(svc.Spec.Ports).To(HaveLen(1))
			Expect(svc.Spec.Ports[0].Name).To(Equal("postgres"))
			Expect(svc.Spec.Ports[0].Port).To(Equal(int32(5432)))

			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "my-database")
				g.Expect(db.Status.SecretName).To(Equal("my-database-credentials"))
				g.Expect(db.Status.Endpoint).To(Equal("my-database." + ns + ".svc.cluster.local:5432"))
			}).Should(Succeed())
		})

		It("leaves storageClassName unset when spec.storage.storageClass is empty", func() {
			newDatabase(ns, "plain")
			Eventually(func(g Gomega) {
				sts := getStatefulSet(g, ns, "plain")
				// The DefaultStorageClass admission plugin fills it in on a real cluster.
				g.Expect(sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName).To(BeNil())
			}).Should(Succeed())
		})

		It("generates the password once and never rotates it", func() {
			newDatabase(ns, "stable")
			key := client.ObjectKey{Namespace: ns, Name: "stable-credentials"}
			secret := &corev1.Secret{}
			Eventually(func() error { return k8sClient.Get(ctx, key, secret) }).Should(Succeed())
			password := string(secret.Data["password"])

			By("changing the username, which the controller writes into the Secret")
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "stable")
				db.Spec.Username = "owner"
				g.Expect(k8sClient.Update(ctx, db)).To(Succeed())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, key, secret)).To(Succeed())
				g.Expect(string(secret.Data["username"])).To(Equal("owner"))
			}).Should(Succeed())
			Expect(string(secret.Data["password"])).To(Equal(password))

			By("driving more reconciles through the StatefulSet")
			setStatefulSetReady(ns, "stable", 1)
			Eventually(func(g Gomega) {
				g.Expect(getDatabase(g, ns, "stable").Status.Phase).To(Equal(databasev1.DatabasePhaseReady))
			}).Should(Succeed())
			Expect(k8sClient.Get(ctx, key, secret)).To(Succeed())
			Expect(string(secret.Data["password"])).To(Equal(password))
		})
	})

	Context("drift", func() {
		var db *databasev1.Database
		BeforeEach(func() {
			db = newDatabase(ns, "drift")
			Eventually(func(g Gomega) { getStatefulSet(g, ns, "drift") }).Should(Succeed())
		})

		It("reverts an edited StatefulSet image and replicas", func() {
			Eventually(func(g Gomega) {
				sts := getStatefulSet(g, ns, "drift")
				sts.Spec.Template.Spec.Containers[0].Image = "postgres:9"
				sts.Spec.Replicas = ptr.To[int32](4)
				g.Expect(k8sClient.Update(ctx, sts)).To(Succeed())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				sts := getStatefulSet(g, ns, "drift")
				g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("postgres:14"))
				g.Expect(*sts.Spec.Replicas).To(Equal(int32(1)))
			}, reactionTimeout, pollInterval).Should(Succeed())
		})

		It("re-creates a deleted StatefulSet, Service and Secret", func() {
			sts := &appsv1.StatefulSet{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, sts)).To(Succeed())
			svc := &corev1.Service{}
			Eventually(func() error {
				return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, svc)
			}).Should(Succeed())
			secret := &corev1.Secret{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift-credentials"}, secret)).To(Succeed())

			for _, obj := range []client.Object{sts, svc, secret} {
				oldUID := obj.GetUID()
				Expect(k8sClient.Delete(ctx, obj)).To(Succeed())
				Eventually(func(g Gomega) {
					fresh := obj.DeepCopyObject().(client.Object)
					g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), fresh)).To(Succeed())
					g.Expect(fresh.GetUID()).NotTo(Equal(oldUID))
					expectControlledBy(fresh, db)
				}, reactionTimeout, pollInterval).Should(Succeed(), "%T %s re-created", obj, obj.GetName())
			}
		})

		It("corrects an edited Service port and selector", func() {
			Eventually(func(g Gomega) {
				svc := &corev1.Service{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, svc)).To(Succeed())
				svc.Spec.Ports[0].Port = 6543
				svc.Spec.Selector = map[string]string{"app": "other"}
				g.Expect(k8sClient.Update(ctx, svc)).To(Succeed())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				svc := &corev1.Service{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, svc)).To(Succeed())
				g.Expect(svc.Spec.Ports).To(HaveLen(1))
				g.Expect(svc.Spec.Ports[0].Port).To(Equal(int32(5432)))
				g.Expect(svc.Spec.Selector).To(Equal(map[string]string{"app": "database", "database": "drift"}))
			}, reactionTimeout, pollInterval).Should(Succeed())
		})

		It("applies a replicas-only change with a merge patch and an image change with an update", func() {
			sts := &appsv1.StatefulSet{}
			By("changing spec.replicas")
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "drift")
				db.Spec.Replicas = ptr.To[int32](3)
				g.Expect(k8sClient.Update(ctx, db)).To(Succeed())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(*getStatefulSet(g, ns, "drift").Spec.Replicas).To(Equal(int32(3)))
			}).Should(Succeed())
			calls := writes.forObject(sts, ns, "drift")
			Expect(calls).To(ContainElement(mergePatch))
			Expect(calls).NotTo(ContainElement("update"), "a replicas-only change must not update the whole StatefulSet")

			By("changing spec.image (course bug B1 never applied it)")
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "drift")
				db.Spec.Image = "postgres:16"
				g.Expect(k8sClient.Update(ctx, db)).To(Succeed())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(getStatefulSet(g, ns, "drift").Spec.Template.Spec.Containers[0].Image).To(Equal("postgres:16"))
			}).Should(Succeed())
			Expect(writes.forObject(sts, ns, "drift")).To(ContainElement("update"))
			Expect(*getStatefulSet(Default, ns, "drift").Spec.Replicas).To(Equal(int32(3)))
		})
	})

	Context("state machine", func() {
		It("forgets a Database that does not exist: no error and no requeue (lab 6.2)", func() {
			r := &DatabaseReconciler{Client: k8sClient, Scheme: testScheme, Recorder: events.NewFakeRecorder(10), APIReader: k8sClient}
			result, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "never-created"}})
			Expect(err).NotTo(HaveOccurred())
			Expect(result).To(Equal(reconcile.Result{}))
		})

		It("is Ready only when readyReplicas equals the desired replicas", func() {
			newDatabase(ns, "phases")

			By("waiting for replicas")
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "phases")
				g.Expect(db.Status.Phase).To(Equal(databasev1.DatabasePhaseDeploying))
				g.Expect(db.Status.Ready).To(BeFalse())
				ready := condition(db.Status.Conditions, databasev1.ConditionReady)
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Reason).To(Equal(databasev1.ReasonReplicasNotReady))
				g.Expect(ready.Message).To(Equal("0/1 replicas ready"))
				progressing := condition(db.Status.Conditions, databasev1.ConditionProgressing)
				g.Expect(progressing.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(progressing.Reason).To(Equal(databasev1.ReasonCreating))
			}).Should(Succeed())

			By("all replicas ready")
			setStatefulSetReady(ns, "phases", 1)
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "phases")
				g.Expect(db.Status.Phase).To(Equal(databasev1.DatabasePhaseReady))
				g.Expect(db.Status.Ready).To(BeTrue())
				g.Expect(db.Status.ObservedGeneration).To(Equal(db.Generation))
				ready := condition(db.Status.Conditions, databasev1.ConditionReady)
				g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(ready.Reason).To(Equal(databasev1.ReasonAllReplicasReady))
				g.Expect(ready.ObservedGeneration).To(Equal(db.Generation))
				progressing := condition(db.Status.Conditions, databasev1.ConditionProgressing)
				g.Expect(progressing.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(progressing.Reason).To(Equal(databasev1.ReasonReconciliationComplete))
			}, reactionTimeout, pollInterval).Should(Succeed())

			By("scaling to 3 with one replica ready")
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "phases")
				db.Spec.Replicas = ptr.To[int32](3)
				g.Expect(k8sClient.Update(ctx, db)).To(Succeed())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "phases")
				g.Expect(db.Status.Phase).To(Equal(databasev1.DatabasePhaseDeploying))
				g.Expect(db.Status.Ready).To(BeFalse())
				g.Expect(db.Status.ObservedGeneration).To(Equal(db.Generation))
				ready := condition(db.Status.Conditions, databasev1.ConditionReady)
				g.Expect(ready.Reason).To(Equal(databasev1.ReasonReplicasNotReady))
				g.Expect(ready.Message).To(Equal("1/3 replicas ready"))
				progressing := condition(db.Status.Conditions, databasev1.ConditionProgressing)
				g.Expect(progressing.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(progressing.Reason).To(Equal(databasev1.ReasonScaling))
			}).Should(Succeed())

			By("two of three ready is still not Ready")
			setStatefulSetReady(ns, "phases", 2)
			Eventually(func(g Gomega) {
				g.Expect(condition(getDatabase(g, ns, "phases").Status.Conditions, databasev1.ConditionReady).Message).
					To(Equal("2/3 replicas ready"))
			}).Should(Succeed())
			Expect(getDatabase(Default, ns, "phases").Status.Phase).To(Equal(databasev1.DatabasePhaseDeploying))

			By("three of three")
			setStatefulSetReady(ns, "phases", 3)
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "phases")
				g.Expect(db.Status.Phase).To(Equal(databasev1.DatabasePhaseReady))
				g.Expect(db.Status.Ready).To(BeTrue())
			}, reactionTimeout, pollInterval).Should(Succeed())

			Eventually(func(g Gomega) {
				g.Expect(eventReasons(g, ns, "phases")).To(ContainElements("Created", "Ready"))
			}).Should(Succeed())
		})

		It("writes no status from a stale read: the patch carries the resourceVersion, and the conflict is left to the watch", func() {
			newDatabase(ns, "stale")
			var stale *databasev1.Database
			Eventually(func(g Gomega) {
				stale = getDatabase(g, ns, "stale")
				g.Expect(stale.Status.Phase).To(Equal(databasev1.DatabasePhaseDeploying))
			}).Should(Succeed())

			By("a newer Database written meanwhile")
			var newer string
			Eventually(func(g Gomega) {
				fresh := getDatabase(g, ns, "stale")
				fresh.Annotations = map[string]string{"someone": "else"}
				g.Expect(k8sClient.Update(ctx, fresh)).To(Succeed())
				newer = fresh.ResourceVersion
			}).Should(Succeed())

			By("a pass that read the older one moving to Ready")
			recorder := events.NewFakeRecorder(10)
			r := &DatabaseReconciler{Client: k8sClient, Scheme: testScheme, Recorder: recorder}
			db := stale.DeepCopy()
			db.Status.Phase = databasev1.DatabasePhaseReady
			r.setCondition(db, databasev1.ConditionReady, metav1.ConditionTrue, databasev1.ReasonAllReplicasReady, "stale")
			Expect(r.updateStatus(ctx, stale, db)).To(Succeed(), "a conflict is not an error: the watch brings the newer Database")

			// The manager writes nothing while the Database stays Deploying,
			// so a status written from the stale read would show as a new
			// resourceVersion.
			got := getDatabase(Default, ns, "stale")
			Expect(got.ResourceVersion).To(Equal(newer), "the stale pass wrote the status")
			Expect(got.Status.Phase).To(Equal(databasev1.DatabasePhaseDeploying))
			Expect(condition(got.Status.Conditions, databasev1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
			Expect(recorder.Events).To(BeEmpty(), "an event announced a status that was never written")

			By("the pass that writes Ready announcing it once")
			fresh := got.DeepCopy()
			fresh.Status.Phase = databasev1.DatabasePhaseReady
			r.setCondition(fresh, databasev1.ConditionReady, metav1.ConditionTrue, databasev1.ReasonAllReplicasReady, "1/1 replicas ready")
			Expect(r.updateStatus(ctx, got, fresh)).To(Succeed())
			Expect(recorder.Events).To(HaveLen(1))
			Expect(<-recorder.Events).To(Equal("Normal Ready Database is ready: 1/1 replicas ready"))
		})
	})

	Context("lab 3.4 client helpers", func() {
		It("lists by namespace and by labels", func() {
			other := newNamespace()
			newDatabase(ns, "a", func(db *databasev1.Database) { db.Labels = map[string]string{"team": "x"} })
			newDatabase(ns, "b")
			newDatabase(other, "c", func(db *databasev1.Database) { db.Labels = map[string]string{"team": "x"} })
			r := running.database

			Eventually(func(g Gomega) {
				list, err := r.listDatabasesInNamespace(ctx, ns)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(list.Items).To(ConsistOf(HaveField("Name", "a"), HaveField("Name", "b")))
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				list, err := r.listDatabasesByLabel(ctx, map[string]string{"team": "x"})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(list.Items).To(ConsistOf(HaveField("Name", "a"), HaveField("Name", "c")))
			}).Should(Succeed())
		})

		It("finds Databases by owner through a registered field index", func() {
			owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-owner"}}
			Expect(k8sClient.Create(ctx, owner)).To(Succeed())
			ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
			newDatabase(ns, "owned", func(db *databasev1.Database) { db.OwnerReferences = []metav1.OwnerReference{ref} })
			newDatabase(ns, "unowned")

			Eventually(func(g Gomega) {
				// The manager's cached client: this errors with "index ... does
				// not exist" unless SetupWithManager registered the index.
				list, err := running.database.findDatabasesByOwner(ctx, ns, "team-owner")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(list.Items).To(ConsistOf(HaveField("Name", "owned")))
			}).Should(Succeed())
			list, err := running.database.findDatabasesByOwner(ctx, "", "team-owner")
			Expect(err).NotTo(HaveOccurred())
			Expect(list.Items).To(HaveLen(1))
		})

		It("retries an update on conflict, re-reading and re-applying the change (not course bug B2)", func() {
			counting := &conflictCountingClient{Client: k8sClient}
			r := &DatabaseReconciler{Client: counting, Scheme: testScheme, APIReader: k8sClient}
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "contended", Labels: map[string]string{"app": "test"}},
				Data:       map[string]string{"value": "initial"},
			}
			Expect(k8sClient.Create(ctx, cm)).To(Succeed())
			stale := cm.DeepCopy()

			By("a first concurrent writer making our copy stale")
			writer := func(label string) {
				fresh := &corev1.ConfigMap{}
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cm), fresh)).To(Succeed())
				fresh.Labels[label] = "yes"
				Expect(k8sClient.Update(ctx, fresh)).To(Succeed())
			}
			writer("writer-1")

			attempts := 0
			err := r.updateWithRetry(ctx, stale, func() error {
				attempts++
				if attempts == 1 {
					// A second writer slips in between our read and our write:
					// the update of this attempt must conflict.
					writer("writer-2")
				}
				stale.Data["value"] = "desired"
				return nil
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(counting.conflicts).To(Equal(1), "the first attempt worked on an outdated object")
			Expect(attempts).To(Equal(2), "one conflict, one successful retry")

			final := &corev1.ConfigMap{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cm), final)).To(Succeed())
			Expect(final.Data["value"]).To(Equal("desired"), "the change survives the conflict")
			Expect(final.Labels).To(HaveKey("writer-1"))
			Expect(final.Labels).To(HaveKey("writer-2"), "the concurrent write is not overwritten")
		})

		It("patches replicas without a resourceVersion, so a stale object does not conflict", func() {
			r := &DatabaseReconciler{Client: k8sClient, Scheme: testScheme}
			db := newDatabase(ns, "patchme")
			var sts *appsv1.StatefulSet
			Eventually(func(g Gomega) { sts = getStatefulSet(g, ns, "patchme") }).Should(Succeed())
			stale := sts.DeepCopy()
			Eventually(func(g Gomega) {
				fresh := getStatefulSet(g, ns, "patchme")
				fresh.Annotations = map[string]string{"someone": "else"}
				g.Expect(k8sClient.Update(ctx, fresh)).To(Succeed())
			}).Should(Succeed())
			// The merge patch carries only spec.replicas.
			Expect(r.patchStatefulSetReplicas(ctx, stale, 1)).To(Succeed())
			Expect(getStatefulSet(Default, ns, "patchme").Annotations).To(HaveKeyWithValue("someone", "else"))
			Expect(metav1.IsControlledBy(stale, db)).To(BeTrue())
		})
	})

	Context("spec.backupRef (lab 8.2)", func() {
		It("waits before provisioning until the Backup's BackupReady condition is True", func() {
			newDatabase(ns, "restored", func(db *databasev1.Database) {
				db.Spec.BackupRef = &corev1.LocalObjectReference{Name: "source-backup"}
			})
			By("the Backup does not exist yet")
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "restored")
				g.Expect(db.Status.Phase).To(Equal(databasev1.DatabasePhasePending))
				progressing := condition(db.Status.Conditions, databasev1.ConditionProgressing)
				g.Expect(progressing.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(progressing.Reason).To(Equal(databasev1.ReasonWaitingForBackup))
			}).Should(Succeed())
			// The waiting status is written before any child would be created.
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "restored"}, &appsv1.StatefulSet{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no StatefulSet while waiting for the Backup")

			By("a Backup of another Database that becomes Ready")
			newBackup(ns, "source-backup", "source")
			makeDatabaseReady(ns, "source")
			backup := getBackup(Default, ns, "source-backup")
			job := waitForRunJob(backup, 1)
			Expect(getDatabase(Default, ns, "restored").Status.Phase).To(Equal(databasev1.DatabasePhasePending))

			By("the backup completing: the Database moves on through the Backup watch")
			completeJob(job)
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "restored")
				g.Expect(db.Status.Phase).NotTo(Equal(databasev1.DatabasePhasePending))
				g.Expect(condition(db.Status.Conditions, databasev1.ConditionProgressing).Reason).NotTo(Equal(databasev1.ReasonWaitingForBackup))
				getStatefulSet(g, ns, "restored")
			}, reactionTimeout, pollInterval).Should(Succeed())
		})

		It("announces the wait once, with the status that says so, however often it reconciles", func() {
			// isolatedNamespace: no manager reconciles it, so every pass
			// and every event here is this test's own.
			db := newDatabase(isolatedNamespace, "", func(db *databasev1.Database) {
				db.GenerateName = "waiting-"
				db.Spec.BackupRef = &corev1.LocalObjectReference{Name: "missing-backup"}
			})
			recorder := events.NewFakeRecorder(10)
			r := &DatabaseReconciler{Client: k8sClient, Scheme: testScheme, Recorder: recorder, APIReader: k8sClient}
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(db)}
			for range 3 {
				_, err := r.Reconcile(ctx, req)
				Expect(err).NotTo(HaveOccurred())
			}
			got := getDatabase(Default, isolatedNamespace, db.Name)
			progressing := condition(got.Status.Conditions, databasev1.ConditionProgressing)
			Expect(progressing.Reason).To(Equal(databasev1.ReasonWaitingForBackup))
			Expect(recorder.Events).To(HaveLen(1), "one event for one change of status, not one per pass")
			Expect(<-recorder.Events).To(Equal("Normal WaitingForBackup " + progressing.Message))
		})

		It("does not deadlock on a Backup of itself", func() {
			newBackup(ns, "self-backup", "self")
			newDatabase(ns, "self", func(db *databasev1.Database) {
				db.Spec.BackupRef = &corev1.LocalObjectReference{Name: "self-backup"}
			})
			Eventually(func(g Gomega) { getStatefulSet(g, ns, "self") }).Should(Succeed())
		})
	})

	Context("spec.backupRef against Backup statuses no Backup controller writes", func() {
		// The suite manager's Backup controller would rewrite these statuses, so
		// the objects live in isolatedNamespace, where only a manager of this
		// Context's own runs, with the Database controller alone.
		var (
			isolated *testManager
			// direct reads from the API server, for calling checkBackupStatus.
			direct *DatabaseReconciler
		)
		BeforeEach(func() {
			isolated = startIsolatedDatabaseManager()
			DeferCleanup(isolated.stop)
			direct = &DatabaseReconciler{Client: k8sClient, Scheme: testScheme}
		})

		// backupWithStatus creates a Backup of another Database and writes status,
		// as a Backup controller would have.
		backupWithStatus := func(status databasev1.BackupStatus) *databasev1.Backup {
			backup := &databasev1.Backup{
				ObjectMeta: metav1.ObjectMeta{Namespace: isolatedNamespace, GenerateName: "source-backup-"},
				Spec:       databasev1.BackupSpec{DatabaseRef: corev1.LocalObjectReference{Name: "source"}},
			}
			Expect(k8sClient.Create(ctx, backup)).To(Succeed())
			backup.Status = status
			Expect(k8sClient.Status().Update(ctx, backup)).To(Succeed())
			return backup
		}
		restoredFrom := func(backup *databasev1.Backup) *databasev1.Database {
			return newDatabase(isolatedNamespace, "", func(db *databasev1.Database) {
				db.GenerateName = "restored-"
				db.Spec.BackupRef = &corev1.LocalObjectReference{Name: backup.Name}
			})
		}
		readyCondition := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
			return []metav1.Condition{{Type: databasev1.ConditionBackupReady, Status: status, Reason: reason,
				Message: "written by the test", LastTransitionTime: metav1.Now()}}
		}
		expectWaiting := func(db *databasev1.Database, message string) {
			Eventually(func(g Gomega) {
				got := getDatabase(g, db.Namespace, db.Name)
				g.Expect(got.Status.Phase).To(Equal(databasev1.DatabasePhasePending))
				progressing := condition(got.Status.Conditions, databasev1.ConditionProgressing)
				g.Expect(progressing.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(progressing.Reason).To(Equal(databasev1.ReasonWaitingForBackup))
				g.Expect(progressing.Message).To(ContainSubstring(message))
			}, reactionTimeout, pollInterval).Should(Succeed())
		}
		// expectStillWaiting checks for a while that the Database provisions
		// nothing and that nobody rewrote the Backup status under test.
		expectStillWaiting := func(db *databasev1.Database, backup *databasev1.Backup) {
			Consistently(func(g Gomega) {
				err := k8sClient.Get(ctx, client.ObjectKeyFromObject(db), &appsv1.StatefulSet{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no StatefulSet while waiting: %v", err)
				g.Expect(getDatabase(g, db.Namespace, db.Name).Status.Phase).To(Equal(databasev1.DatabasePhasePending))
				g.Expect(getBackup(g, backup.Namespace, backup.Name).Status).To(Equal(backup.Status))
			}, quietPeriod, pollInterval).Should(Succeed())
		}

		It("keeps waiting on a Backup whose phase is Completed but that has no condition (nil-safe)", func() {
			backup := backupWithStatus(databasev1.BackupStatus{Phase: databasev1.BackupPhaseCompleted})
			db := restoredFrom(backup)
			ready, message, err := direct.checkBackupStatus(ctx, db)
			Expect(err).NotTo(HaveOccurred())
			Expect(ready).To(BeFalse())
			Expect(message).To(ContainSubstring("no BackupReady condition"))

			By("the running Database controller waiting too, not panicking")
			expectWaiting(db, "no BackupReady condition")
			expectStillWaiting(db, backup)

			By("a True BackupReady condition arriving: the Backup watch releases the Database")
			Eventually(func(g Gomega) {
				current := getBackup(g, isolatedNamespace, backup.Name)
				current.Status.Conditions = readyCondition(metav1.ConditionTrue, databasev1.ReasonBackupCompleted)
				g.Expect(k8sClient.Status().Update(ctx, current)).To(Succeed())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				getStatefulSet(g, isolatedNamespace, db.Name)
				g.Expect(getDatabase(g, isolatedNamespace, db.Name).Status.Phase).NotTo(Equal(databasev1.DatabasePhasePending))
			}, reactionTimeout, pollInterval).Should(Succeed())
		})

		It("keeps waiting while BackupReady is False, whatever the phase", func() {
			backup := backupWithStatus(databasev1.BackupStatus{Phase: databasev1.BackupPhaseCompleted,
				Conditions: readyCondition(metav1.ConditionFalse, databasev1.ReasonBackupInProgress)})
			db := restoredFrom(backup)
			ready, message, err := direct.checkBackupStatus(ctx, db)
			Expect(err).NotTo(HaveOccurred())
			Expect(ready).To(BeFalse())
			Expect(message).To(ContainSubstring("BackupReady=False"))

			expectWaiting(db, "BackupReady=False")
			expectStillWaiting(db, backup)
		})

		It("proceeds when BackupReady is True, even with another phase", func() {
			backup := backupWithStatus(databasev1.BackupStatus{Phase: databasev1.BackupPhaseInProgress,
				Conditions: readyCondition(metav1.ConditionTrue, databasev1.ReasonBackupCompleted)})
			db := restoredFrom(backup)
			ready, _, err := direct.checkBackupStatus(ctx, db)
			Expect(err).NotTo(HaveOccurred())
			Expect(ready).To(BeTrue())

			var sts *appsv1.StatefulSet
			Eventually(func(g Gomega) {
				sts = getStatefulSet(g, isolatedNamespace, db.Name)
				got := getDatabase(g, isolatedNamespace, db.Name)
				g.Expect(got.Status.Phase).To(Equal(databasev1.DatabasePhaseDeploying))
				g.Expect(condition(got.Status.Conditions, databasev1.ConditionProgressing).Reason).NotTo(Equal(databasev1.ReasonWaitingForBackup))
			}, reactionTimeout, pollInterval).Should(Succeed())
			expectControlledBy(sts, db)
			Expect(getBackup(Default, isolatedNamespace, backup.Name).Status).To(Equal(backup.Status))
		})

		It("waits for a missing Backup and does not wait without backupRef", func() {
			db := restoredFrom(&databasev1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "missing-backup"}})
			ready, message, err := direct.checkBackupStatus(ctx, db)
			Expect(err).NotTo(HaveOccurred())
			Expect(ready).To(BeFalse())
			Expect(message).To(ContainSubstring("not found"))
			expectWaiting(db, "not found")

			db.Spec.BackupRef = nil
			ready, _, err = direct.checkBackupStatus(ctx, db)
			Expect(err).NotTo(HaveOccurred())
			Expect(ready).To(BeTrue())
		})
	})

	Context("CRD schema", func() {
		It("defaults image and replicas and validates replicas and storage size", func() {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("database.example.com/v1")
			u.SetKind("Database")
			u.SetNamespace(ns)
			u.SetName("defaults")
			Expect(unstructured.SetNestedMap(u.Object, map[string]any{
				"databaseName": "mydb", "username": "admin", "storage": map[string]any{"size": "1Gi"},
			}, "spec")).To(Succeed())
			Expect(k8sClient.Create(ctx, u)).To(Succeed())
			db := getDatabase(Default, ns, "defaults")
			Expect(db.Spec.Image).To(Equal("postgres:14"))
			Expect(db.Spec.Replicas).To(Equal(ptr.To[int32](1)))

			bad := []func(*databasev1.Database){
				func(db *databasev1.Database) { db.Spec.Replicas = ptr.To[int32](11) },
				func(db *databasev1.Database) { db.Spec.Replicas = ptr.To[int32](0) },
				func(db *databasev1.Database) { db.Spec.Storage.Size = "10G" },
			}
			for i, mutate := range bad {
				db := &databasev1.Database{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
					Spec: databasev1.DatabaseSpec{Image: "postgres:14", DatabaseName: "d", Username: "u",
						Storage: databasev1.StorageSpec{Size: "1Gi"}},
				}
				mutate(db)
				err := k8sClient.Create(ctx, db)
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "case %d: %v", i, err)
			}

			By("status.phase accepts only the state machine's phases")
			Eventually(func(g Gomega) {
				db := getDatabase(g, ns, "defaults")
				db.Status.Phase = "Creating"
				err := k8sClient.Status().Update(ctx, db)
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			}).Should(Succeed())
		})
	})
})
