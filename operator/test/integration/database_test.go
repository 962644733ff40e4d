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

package integration_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

// newDatabase is a Database with a name no other run uses.
func newDatabase() *databasev1.Database {
	return &databasev1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("integration-%d", time.Now().UnixNano()), Namespace: namespace},
		Spec: databasev1.DatabaseSpec{
			Image:        "postgres:14",
			Replicas:     ptr.To[int32](1),
			DatabaseName: "mydb",
			Username:     "admin",
			Storage:      databasev1.StorageSpec{Size: "1Gi"},
		},
	}
}

var _ = Describe("The deployed Database operator", func() {
	var (
		ctx context.Context
		db  *databasev1.Database
		key types.NamespacedName
	)

	BeforeEach(func() {
		ctx = context.Background()
		db = newDatabase()
		key = client.ObjectKeyFromObject(db)
		Expect(k8sClient.Create(ctx, db)).To(Succeed())
	})

	AfterEach(func() {
		// A spec that failed half-way leaves its Database behind: let the
		// operator clean up, and do not wait for it.
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, db))).To(Succeed())
	})

	It("creates the StatefulSet, the Service and the credentials Secret", func() {
		Eventually(func(g Gomega) {
			sts := &appsv1.StatefulSet{}
			g.Expect(k8sClient.Get(ctx, key, sts)).To(Succeed())
			g.Expect(sts.Spec.Replicas).To(HaveValue(Equal(int32(1))))
			g.Expect(sts.Spec.Template.Spec.Containers).To(ContainElement(HaveField("Image", "postgres:14")))
		}, operatorTimeout, pollInterval).Should(Succeed())

		Eventually(func(g Gomega) {
			secret := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: namespace, Name: key.Name + "-credentials"}, secret)).To(Succeed())
			g.Expect(secret.Data).To(HaveKey("username"))
			g.Expect(secret.Data).To(HaveKey("password"))
		}, operatorTimeout, pollInterval).Should(Succeed())

		Eventually(func(g Gomega) {
			svc := &corev1.Service{}
			g.Expect(k8sClient.Get(ctx, key, svc)).To(Succeed())
			g.Expect(svc.Spec.Ports).To(ContainElement(HaveField("Port", int32(5432))))
		}, operatorTimeout, pollInterval).Should(Succeed())
	})

	It("scales the StatefulSet with the Database, then deletes the Database", func() {
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, &appsv1.StatefulSet{})).To(Succeed())
		}, operatorTimeout, pollInterval).Should(Succeed())

		By("setting spec.replicas to 3")
		Expect(k8sClient.Patch(ctx, db, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			sts := &appsv1.StatefulSet{}
			g.Expect(k8sClient.Get(ctx, key, sts)).To(Succeed())
			g.Expect(sts.Spec.Replicas).To(HaveValue(Equal(int32(3))))
		}, operatorTimeout, pollInterval).Should(Succeed())

		By("deleting the Database: the operator's finalizer lets it go once it cleaned up")
		Expect(k8sClient.Delete(ctx, db)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key, &databasev1.Database{}))
		}, operatorTimeout, pollInterval).Should(BeTrue())
	})
})
