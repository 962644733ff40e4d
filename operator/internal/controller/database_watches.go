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

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

// statefulSetChanged lets through the StatefulSet updates the Database
// controller acts on (lab 4.3): a new spec (generation) or a change of ready
// replicas. Status churn such as currentRevision or observedGeneration alone
// wakes nobody. Creates and deletes always pass.
var statefulSetChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldSts, ok1 := e.ObjectOld.(*appsv1.StatefulSet)
		newSts, ok2 := e.ObjectNew.(*appsv1.StatefulSet)
		if !ok1 || !ok2 {
			return true
		}
		return oldSts.Generation != newSts.Generation ||
			oldSts.Status.ReadyReplicas != newSts.Status.ReadyReplicas
	},
}

// findDatabasesByImage lists the Databases of a namespace that run image,
// through the imageField index (lab 4.3).
func (r *DatabaseReconciler) findDatabasesByImage(ctx context.Context, namespace, image string) (*databasev1.DatabaseList, error) {
	list := &databasev1.DatabaseList{}
	err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{imageField: image})
	return list, err
}
