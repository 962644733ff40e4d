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

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

// listDatabasesInNamespace lists the Databases of one namespace.
func (r *DatabaseReconciler) listDatabasesInNamespace(ctx context.Context, namespace string) (*databasev1.DatabaseList, error) {
	list := &databasev1.DatabaseList{}
	err := r.List(ctx, list, client.InNamespace(namespace))
	return list, err
}

// listDatabasesByLabel lists the Databases whose labels include all of labels.
func (r *DatabaseReconciler) listDatabasesByLabel(ctx context.Context, labels map[string]string) (*databasev1.DatabaseList, error) {
	list := &databasev1.DatabaseList{}
	err := r.List(ctx, list, client.MatchingLabels(labels))
	return list, err
}

// findDatabasesByOwner lists the Databases that have an owner named ownerName
// (in namespace, or in all namespaces when it is empty). It queries the field
// index ownerNameField that SetupWithManager registers; without that index a
// cached List fails (course bug B3).
func (r *DatabaseReconciler) findDatabasesByOwner(ctx context.Context, namespace, ownerName string) (*databasev1.DatabaseList, error) {
	list := &databasev1.DatabaseList{}
	opts := []client.ListOption{client.MatchingFields{ownerNameField: ownerName}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	err := r.List(ctx, list, opts...)
	return list, err
}

// databasesForBackup maps a Backup event to the Databases whose spec.backupRef
// names that Backup, through the backupRefField index.
func (r *DatabaseReconciler) databasesForBackup(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &databasev1.DatabaseList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{backupRefField: obj.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "Listing the Databases that reference a Backup", "backup", obj.GetName())
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for _, db := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&db)})
	}
	return requests
}
