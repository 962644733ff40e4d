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
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

// Lab 6.4's metrics, read from the registry /metrics serves. isolatedNamespace:
// no manager reconciles it, so the Database's passes are this spec's own
// (the counters are shared with the suite's manager, so they only grow).
var _ = Describe("Database metrics", func() {
	family := func(name string) *dto.MetricFamily {
		families, err := metrics.Registry.Gather()
		Expect(err).NotTo(HaveOccurred())
		for _, f := range families {
			if f.GetName() == name {
				return f
			}
		}
		return nil
	}
	// infoOf is the label sets of the database_info series of one Database.
	infoOf := func(db *databasev1.Database) []map[string]string {
		var series []map[string]string
		for _, m := range family("database_info").GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["name"] == db.Name && labels["namespace"] == db.Namespace {
				Expect(m.GetGauge().GetValue()).To(Equal(1.0))
				series = append(series, labels)
			}
		}
		return series
	}
	successes := func() (count float64, observed uint64) {
		for _, m := range family("database_reconcile_total").GetMetric() {
			if m.GetLabel()[0].GetValue() == "success" {
				count = m.GetCounter().GetValue()
			}
		}
		for _, m := range family("database_reconcile_duration_seconds").GetMetric() {
			if m.GetLabel()[0].GetValue() == "success" {
				observed = m.GetHistogram().GetSampleCount()
			}
		}
		return count, observed
	}

	It("counts and times every reconciliation, and keeps one database_info series per Database with its phase", func() {
		db := newDatabase(isolatedNamespace, "", func(db *databasev1.Database) { db.GenerateName = "metered-" })
		r := &DatabaseReconciler{Client: k8sClient, Scheme: testScheme, APIReader: k8sClient}
		reconcileOnce := func() {
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(db)})
			Expect(err).NotTo(HaveOccurred())
		}
		countBefore, observedBefore := successes()

		reconcileOnce()
		Expect(infoOf(db)).To(ConsistOf(map[string]string{
			"name": db.Name, "namespace": isolatedNamespace, "image": "postgres:14", "phase": string(databasev1.DatabasePhaseProvisioning),
		}))
		reconcileOnce()
		Expect(infoOf(db)).To(ConsistOf(HaveKeyWithValue("phase", string(databasev1.DatabasePhaseConfiguring))),
			"a phase change replaces the series, it does not add one")
		count, observed := successes()
		Expect(count - countBefore).To(BeNumerically(">=", 2))
		Expect(observed - observedBefore).To(BeNumerically(">=", 2))

		Expect(k8sClient.Delete(ctx, db)).To(Succeed())
		for range 2 {
			reconcileOnce()
		}
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(db), &databasev1.Database{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Database is still there: %v", err)
		Expect(infoOf(db)).To(BeEmpty(), "a deleted Database leaves no series behind")
	})
})
