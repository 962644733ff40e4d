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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

// Lab 6.4's metrics, served on the manager's /metrics endpoint beside
// controller-runtime's own.
var (
	reconcileTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "database_reconcile_total",
		Help: "Reconciliations of Databases, by result: success, requeue or error.",
	}, []string{"result"})

	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "database_reconcile_duration_seconds",
		Help:    "How long reconciliations of Databases take, by result: success, requeue or error.",
		Buckets: prometheus.DefBuckets,
	}, []string{"result"})

	// databaseInfo has one series per Database, always 1, labelled with its
	// image and phase: a phase change replaces the series rather than
	// leaving the old phase's series behind at 1.
	databaseInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "database_info",
		Help: "One series per Database, always 1: its image and its phase.",
	}, []string{"name", "namespace", "image", "phase"})
)

func init() {
	metrics.Registry.MustRegister(reconcileTotal, reconcileDuration, databaseInfo)
}

// observeReconcile starts timing a reconciliation; the function it returns,
// deferred with the reconciliation's named results, records its count and
// duration by result.
func observeReconcile() func(*ctrl.Result, *error) {
	start := time.Now()
	return func(result *ctrl.Result, err *error) {
		outcome := "success"
		switch {
		case *err != nil:
			outcome = "error"
		case result.RequeueAfter > 0:
			outcome = "requeue"
		}
		reconcileDuration.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
		reconcileTotal.WithLabelValues(outcome).Inc()
	}
}

// recordDatabaseInfo sets the Database's database_info series to what the
// reconciliation left it with; a Database being deleted has none.
func recordDatabaseInfo(db *databasev1.Database) {
	forgetDatabaseInfo(types.NamespacedName{Namespace: db.Namespace, Name: db.Name})
	if db.DeletionTimestamp.IsZero() {
		databaseInfo.WithLabelValues(db.Name, db.Namespace, db.Spec.Image, string(db.Status.Phase)).Set(1)
	}
}

// forgetDatabaseInfo removes the series of a Database that is gone.
func forgetDatabaseInfo(key types.NamespacedName) {
	databaseInfo.DeletePartialMatch(prometheus.Labels{"name": key.Name, "namespace": key.Namespace})
}
