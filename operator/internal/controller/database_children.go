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
	"crypto/rand"
	"encoding/base64"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	databasev1 "github.com/example/postgres-operator/api/v1"
)

// reconcileSecret makes sure the credentials Secret exists with the spec's
// username and database. The password is generated once and never rotated.
func (r *DatabaseReconciler) reconcileSecret(ctx context.Context, db *databasev1.Database) error {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: db.Namespace, Name: secretName(db)}
	err := r.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: corev1.SecretTypeOpaque}
		if err := r.mutateSecret(secret, db); err != nil {
			return err
		}
		logf.FromContext(ctx).Info("Creating Secret", "secret", key.Name)
		if err := r.Create(ctx, secret); err == nil || !apierrors.IsAlreadyExists(err) {
			return err
		}
		// The cache was behind: someone (us, a moment ago) created it.
		err = r.reader().Get(ctx, key, secret)
	}
	if err != nil {
		return err
	}
	check := secret.DeepCopy()
	if err := r.mutateSecret(check, db); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(check.Data, secret.Data) && equality.Semantic.DeepEqual(check.OwnerReferences, secret.OwnerReferences) {
		return nil
	}
	logf.FromContext(ctx).Info("Correcting drift of Secret", "secret", key.Name)
	return r.updateWithRetry(ctx, secret, func() error { return r.mutateSecret(secret, db) })
}

// mutateSecret applies the desired state to a credentials Secret, keeping the
// existing password when there is one.
func (r *DatabaseReconciler) mutateSecret(secret *corev1.Secret, db *databasev1.Database) error {
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data["username"] = []byte(db.Spec.Username)
	secret.Data["database"] = []byte(db.Spec.DatabaseName)
	if len(secret.Data["password"]) == 0 {
		password, err := generatePassword()
		if err != nil {
			return err
		}
		secret.Data["password"] = []byte(password)
	}
	return controllerutil.SetControllerReference(db, secret, r.Scheme)
}

// reconcileStatefulSet creates the StatefulSet or corrects its drift. A change of
// replicas alone is applied with a merge patch; any other change with an update
// retried on conflict. It returns the StatefulSet and whether it was created.
func (r *DatabaseReconciler) reconcileStatefulSet(ctx context.Context, db *databasev1.Database) (*appsv1.StatefulSet, bool, error) {
	log := logf.FromContext(ctx)
	desired, err := r.desiredStatefulSet(db)
	if err != nil {
		return nil, false, err
	}
	statefulSet := &appsv1.StatefulSet{}
	key := client.ObjectKeyFromObject(desired)
	err = r.Get(ctx, key, statefulSet)
	if apierrors.IsNotFound(err) {
		log.Info("Creating StatefulSet", "statefulset", key.Name)
		if err := r.Create(ctx, desired); err == nil {
			return desired, true, nil
		} else if !apierrors.IsAlreadyExists(err) {
			return nil, false, err
		}
		err = r.reader().Get(ctx, key, statefulSet)
	}
	if err != nil {
		return nil, false, err
	}

	replicasDiffer, otherDiffer := statefulSetDrift(statefulSet, desired)
	switch {
	case otherDiffer:
		log.Info("Updating StatefulSet", "statefulset", key.Name)
		err = r.updateWithRetry(ctx, statefulSet, func() error {
			return r.mutateStatefulSet(statefulSet, desired, db)
		})
	case replicasDiffer:
		// If only replicas changed, use patch. The values are compared, not the
		// *int32 pointers (course bug B1: comparing pointers is always true).
		log.Info("Patching StatefulSet replicas", "statefulset", key.Name,
			"from", ptr.Deref(statefulSet.Spec.Replicas, 1), "to", *desired.Spec.Replicas)
		err = r.patchStatefulSetReplicas(ctx, statefulSet, *desired.Spec.Replicas)
	}
	return statefulSet, false, err
}

// statefulSetDrift compares an existing StatefulSet with the desired one, field
// by field for the fields this operator owns (values, never pointers), and says
// whether the replicas differ and whether anything else differs.
func statefulSetDrift(existing, desired *appsv1.StatefulSet) (replicasDiffer, otherDiffer bool) {
	replicasDiffer = ptr.Deref(existing.Spec.Replicas, 1) != ptr.Deref(desired.Spec.Replicas, 1)

	owner := metav1.GetControllerOf(desired)
	if !metav1.IsControlledBy(existing, ownerObject(owner)) {
		return replicasDiffer, true
	}
	for k, v := range desired.Spec.Template.Labels {
		if existing.Spec.Template.Labels[k] != v {
			return replicasDiffer, true
		}
	}
	want := desired.Spec.Template.Spec.Containers[0]
	got := findContainer(existing.Spec.Template.Spec.Containers, want.Name)
	if got == nil ||
		got.Image != want.Image ||
		!equality.Semantic.DeepEqual(got.Env, want.Env) ||
		!equality.Semantic.DeepEqual(got.Ports, want.Ports) ||
		!equality.Semantic.DeepEqual(got.VolumeMounts, want.VolumeMounts) ||
		!equality.Semantic.DeepEqual(got.Resources, want.Resources) {
		return replicasDiffer, true
	}
	return replicasDiffer, false
}

// mutateStatefulSet applies the desired state onto an existing StatefulSet,
// keeping the fields the API server defaulted and the immutable ones (selector,
// volumeClaimTemplates) as they are.
func (r *DatabaseReconciler) mutateStatefulSet(statefulSet, desired *appsv1.StatefulSet, db *databasev1.Database) error {
	statefulSet.Spec.Replicas = ptr.To(*desired.Spec.Replicas)
	if statefulSet.Spec.Template.Labels == nil {
		statefulSet.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range desired.Spec.Template.Labels {
		statefulSet.Spec.Template.Labels[k] = v
	}
	want := desired.Spec.Template.Spec.Containers[0].DeepCopy()
	got := findContainer(statefulSet.Spec.Template.Spec.Containers, want.Name)
	if got == nil {
		statefulSet.Spec.Template.Spec.Containers = append(statefulSet.Spec.Template.Spec.Containers, *want)
	} else {
		got.Image = want.Image
		got.Env = want.Env
		got.Ports = want.Ports
		got.VolumeMounts = want.VolumeMounts
		got.Resources = want.Resources
	}
	return controllerutil.SetControllerReference(db, statefulSet, r.Scheme)
}

// patchStatefulSetReplicas changes only spec.replicas, with a JSON merge patch
// computed against the object as read: no full update, no conflict on an
// unrelated concurrent change.
func (r *DatabaseReconciler) patchStatefulSetReplicas(ctx context.Context, statefulSet *appsv1.StatefulSet, replicas int32) error {
	patch := client.MergeFrom(statefulSet.DeepCopy())
	statefulSet.Spec.Replicas = &replicas
	return r.Patch(ctx, statefulSet, patch)
}

// updateWithRetry updates obj, retrying on conflict with client-go's
// retry.RetryOnConflict. Every attempt reads the newest obj from the API server
// and calls mutate to apply the desired changes to it again before the update,
// so a conflict never loses them (course bug B2 re-read and then sent the re-read
// object without the changes). mutate must modify obj itself.
func (r *DatabaseReconciler) updateWithRetry(ctx context.Context, obj client.Object, mutate func() error) error {
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.reader().Get(ctx, key, obj); err != nil {
			return err
		}
		if err := mutate(); err != nil {
			return err
		}
		return r.Update(ctx, obj)
	})
}

// reconcileService creates the Service or corrects its drift.
func (r *DatabaseReconciler) reconcileService(ctx context.Context, db *databasev1.Database) error {
	service := &corev1.Service{}
	key := client.ObjectKey{Namespace: db.Namespace, Name: db.Name}
	err := r.Get(ctx, key, service)
	if apierrors.IsNotFound(err) {
		service = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := r.mutateService(service, db); err != nil {
			return err
		}
		logf.FromContext(ctx).Info("Creating Service", "service", key.Name)
		if err := r.Create(ctx, service); err == nil || !apierrors.IsAlreadyExists(err) {
			return err
		}
		err = r.reader().Get(ctx, key, service)
	}
	if err != nil {
		return err
	}
	check := service.DeepCopy()
	if err := r.mutateService(check, db); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(check.Spec, service.Spec) && equality.Semantic.DeepEqual(check.OwnerReferences, service.OwnerReferences) {
		return nil
	}
	logf.FromContext(ctx).Info("Correcting drift of Service", "service", key.Name)
	return r.updateWithRetry(ctx, service, func() error { return r.mutateService(service, db) })
}

// mutateService applies the desired type, selector and port to a Service,
// keeping what the API server assigned (cluster IPs and the like).
func (r *DatabaseReconciler) mutateService(service *corev1.Service, db *databasev1.Database) error {
	service.Spec.Type = corev1.ServiceTypeClusterIP
	service.Spec.Selector = podLabels(db)
	port := corev1.ServicePort{
		Name:       "postgres",
		Protocol:   corev1.ProtocolTCP,
		Port:       postgresPort,
		TargetPort: intstr.FromInt32(postgresPort),
	}
	if len(service.Spec.Ports) != 1 || service.Spec.Ports[0] != port {
		service.Spec.Ports = []corev1.ServicePort{port}
	}
	return controllerutil.SetControllerReference(db, service, r.Scheme)
}

// desiredStatefulSet builds the StatefulSet for a Database, with its controller
// owner reference.
func (r *DatabaseReconciler) desiredStatefulSet(db *databasev1.Database) (*appsv1.StatefulSet, error) {
	size, err := resource.ParseQuantity(db.Spec.Storage.Size)
	if err != nil {
		return nil, fmt.Errorf("spec.storage.size: %w", err)
	}
	labels := podLabels(db)
	secretRef := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secretName(db)},
			Key:                  key,
		}}
	}
	claim := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: dataVolumeName},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: size,
			}},
		},
	}
	if db.Spec.Storage.StorageClass != "" {
		claim.Spec.StorageClassName = ptr.To(db.Spec.Storage.StorageClass)
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: db.Name, Namespace: db.Namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(desiredReplicas(db)),
			ServiceName: db.Name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  postgresContainer,
					Image: db.Spec.Image,
					Ports: []corev1.ContainerPort{{Name: "postgres", ContainerPort: postgresPort, Protocol: corev1.ProtocolTCP}},
					Env: []corev1.EnvVar{
						{Name: "POSTGRES_DB", ValueFrom: secretRef("database")},
						{Name: "POSTGRES_USER", ValueFrom: secretRef("username")},
						{Name: "POSTGRES_PASSWORD", ValueFrom: secretRef("password")},
						{Name: "PGDATA", Value: pgDataPath},
					},
					VolumeMounts: []corev1.VolumeMount{{Name: dataVolumeName, MountPath: dataMountPath}},
					Resources:    *db.Spec.Resources.DeepCopy(),
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claim},
		},
	}
	if err := controllerutil.SetControllerReference(db, sts, r.Scheme); err != nil {
		return nil, err
	}
	return sts, nil
}

func findContainer(containers []corev1.Container, name string) *corev1.Container {
	for i := range containers {
		if containers[i].Name == name {
			return &containers[i]
		}
	}
	return nil
}

func desiredReplicas(db *databasev1.Database) int32 {
	return ptr.Deref(db.Spec.Replicas, 1)
}

func secretName(db *databasev1.Database) string {
	return db.Name + "-credentials"
}

func podLabels(db *databasev1.Database) map[string]string {
	return map[string]string{"app": "database", "database": db.Name}
}

// generatePassword returns 16 random characters of base64url.
func generatePassword() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
