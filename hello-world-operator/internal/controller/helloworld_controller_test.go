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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hellov1 "github.com/example/hello-world-operator/api/v1"
)

var _ = Describe("HelloWorld controller", func() {
	var ns string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hello-"}}
		Expect(k8sClient.Create(ctx, n)).To(Succeed())
		ns = n.Name
	})

	newHello := func(name, message string, count int32) *hellov1.HelloWorld {
		hw := &hellov1.HelloWorld{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       hellov1.HelloWorldSpec{Message: message, Count: count},
		}
		Expect(k8sClient.Create(ctx, hw)).To(Succeed())
		return hw
	}
	configMap := func(name string) func(Gomega) *corev1.ConfigMap {
		return func(g Gomega) *corev1.ConfigMap {
			cm := &corev1.ConfigMap{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm)).To(Succeed())
			return cm
		}
	}

	It("creates <name>-config with the message and count, owned by the HelloWorld, and reports it", func() {
		hw := newHello("hello-example", "Hello from my first operator!", 5)
		Eventually(configMap("hello-example-config")).Should(And(
			HaveField("Data", Equal(map[string]string{"message": "Hello from my first operator!", "count": "5"})),
			WithTransform(func(cm *corev1.ConfigMap) *metav1.OwnerReference { return metav1.GetControllerOf(cm) },
				And(Not(BeNil()), HaveField("UID", hw.UID), HaveField("Kind", "HelloWorld"))),
		))
		Eventually(func(g Gomega) {
			got := &hellov1.HelloWorld{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(hw), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal("Ready"))
			g.Expect(got.Status.ConfigMapCreated).To(BeTrue())
			g.Expect(got.Status.LastUpdated).NotTo(BeNil())
		}).Should(Succeed())
	})

	It("carries a new message and count to the ConfigMap", func() {
		hw := newHello("trace-test", "Trace me", 3)
		Eventually(configMap("trace-test-config")).Should(HaveField("Data", HaveKeyWithValue("count", "3")))
		patch := client.MergeFrom(hw.DeepCopy())
		hw.Spec.Message, hw.Spec.Count = "Updated message!", 5
		Expect(k8sClient.Patch(ctx, hw, patch)).To(Succeed())
		Eventually(configMap("trace-test-config")).Should(HaveField("Data",
			Equal(map[string]string{"message": "Updated message!", "count": "5"})))
	})

	It("puts back a deleted ConfigMap at once (it owns them)", func() {
		newHello("owned", "mine", 1)
		Eventually(configMap("owned-config")).Should(Not(BeNil()))
		old := configMap("owned-config")(Default)
		Expect(k8sClient.Delete(ctx, old)).To(Succeed())
		Eventually(configMap("owned-config"), 2*time.Second).Should(HaveField("UID", Not(Equal(old.UID))))
	})

	It("rejects what the schema forbids", func() {
		for _, count := range []int32{0, 101} {
			hw := &hellov1.HelloWorld{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("count-%d", count)},
				Spec:       hellov1.HelloWorldSpec{Message: "m", Count: count},
			}
			if count == 0 {
				// count is omitempty: 0 is left out, which the schema allows.
				Expect(k8sClient.Create(ctx, hw)).To(Succeed())
				continue
			}
			Expect(apierrors.IsInvalid(k8sClient.Create(ctx, hw))).To(BeTrue(), "count %d", count)
		}
	})

	It("asks to look again later after creating the ConfigMap, and not when all is in place", func() {
		hw := &hellov1.HelloWorld{
			ObjectMeta: metav1.ObjectMeta{Namespace: isolatedNamespace, Name: "direct"},
			Spec:       hellov1.HelloWorldSpec{Message: "m", Count: 2},
		}
		Expect(k8sClient.Create(ctx, hw)).To(Succeed())
		r := &HelloWorldReconciler{Client: k8sClient, Scheme: testScheme}
		req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hw)}

		res, err := r.Reconcile(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(Equal(configMapRecheck), "a new ConfigMap is looked at again later")

		res, err = r.Reconcile(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(Equal(ctrl.Result{}), "nothing to do: no requeue")

		res, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: isolatedNamespace, Name: "gone"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(Equal(ctrl.Result{}), "a deleted HelloWorld needs nothing")
	})
})
