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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	hellov1 "github.com/example/hello-world-operator/api/v1"
)

// configMapRecheck is how long a HelloWorld whose ConfigMap was just
// created waits before it is reconciled again (lab 3.1, Task 3.2: a
// delayed requeue, never a busy immediate one).
const configMapRecheck = 10 * time.Second

// HelloWorldReconciler reconciles a HelloWorld object
type HelloWorldReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// +kubebuilder:rbac:groups=hello.example.com,resources=helloworlds,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=hello.example.com,resources=helloworlds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hello.example.com,resources=helloworlds/finalizers,verbs=update
// +kubebuilder:rbac:groups=core,resources=configmaps,verbs=get;list;watch;create;update;patch;delete

// Reconcile makes the HelloWorld's ConfigMap <name>-config hold its
// message and count, owned by the HelloWorld, and reports it in the status.
func (r *HelloWorldReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	log := logf.FromContext(ctx)
	log.Info("Reconcile called", "request", req)
	defer func() {
		log.Info("Reconcile completed", "request", req, "result", result, "error", err)
	}()

	helloWorld := &hellov1.HelloWorld{}
	if err := r.Get(ctx, req.NamespacedName, helloWorld); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("Resource not found, may have been deleted", "name", req.NamespacedName)
			return ctrl.Result{}, nil
		}
		log.Error(err, "Failed to get HelloWorld")
		return ctrl.Result{}, err
	}

	created, err := r.reconcileConfigMap(ctx, helloWorld)
	if err != nil {
		return ctrl.Result{}, err
	}

	now := metav1.Now()
	helloWorld.Status.Phase = "Ready"
	helloWorld.Status.ConfigMapCreated = true
	helloWorld.Status.LastUpdated = &now
	if err := r.Status().Update(ctx, helloWorld); err != nil {
		if apierrors.IsConflict(err) {
			// A newer version is on its way to us through the watch.
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		log.Error(err, "Failed to update status")
		return ctrl.Result{}, err
	}

	if created {
		// A fresh ConfigMap: look at it again a little later, without
		// spinning (lab 3.1's delayed requeue).
		log.Info("ConfigMap created, checking it again", "after", configMapRecheck)
		return ctrl.Result{RequeueAfter: configMapRecheck}, nil
	}
	log.Info("Reconciliation successful")
	return ctrl.Result{}, nil
}

// reconcileConfigMap creates the ConfigMap or brings its data up to date;
// created says it did not exist before.
func (r *HelloWorldReconciler) reconcileConfigMap(ctx context.Context, hw *hellov1.HelloWorld) (created bool, err error) {
	log := logf.FromContext(ctx)
	want := map[string]string{
		"message": hw.Spec.Message,
		"count":   fmt.Sprintf("%d", hw.Spec.Count),
	}
	cm := &corev1.ConfigMap{}
	err = r.Get(ctx, client.ObjectKey{Namespace: hw.Namespace, Name: hw.Name + "-config"}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: hw.Name + "-config", Namespace: hw.Namespace},
			Data:       want,
		}
		if err := ctrl.SetControllerReference(hw, cm, r.Scheme); err != nil {
			return false, fmt.Errorf("set the owner of ConfigMap %s: %w", cm.Name, err)
		}
		log.Info("Creating ConfigMap", "name", cm.Name)
		if err := r.Create(ctx, cm); err != nil {
			return false, fmt.Errorf("create ConfigMap %s: %w", cm.Name, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get ConfigMap %s: %w", hw.Name+"-config", err)
	}
	if cm.Data["message"] == want["message"] && cm.Data["count"] == want["count"] {
		return false, nil
	}
	log.Info("Updating ConfigMap", "name", cm.Name)
	cm.Data = want
	if err := r.Update(ctx, cm); err != nil {
		return false, fmt.Errorf("update ConfigMap %s: %w", cm.Name, err)
	}
	return false, nil
}

// SetupWithManager sets up the controller with the Manager. It owns the
// ConfigMaps, so a deleted or edited ConfigMap is put back at once.
func (r *HelloWorldReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&hellov1.HelloWorld{}).
		Owns(&corev1.ConfigMap{}).
		Named("helloworld").
		Complete(r)
}
