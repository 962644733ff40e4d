// Command fixture-operator is the smallest operator a lab can be written
// for: a Greeting gets a ConfigMap <name>-greeting holding its message,
// owned by it, and status.ready=true once that ConfigMap exists. It works
// on unstructured objects so that the module needs no generated code.
package main

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var greeting = schema.GroupVersionKind{Group: "fixture.labctl.dev", Version: "v1", Kind: "Greeting"}

type reconciler struct{ client.Client }

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	g := &unstructured.Unstructured{}
	g.SetGroupVersionKind(greeting)
	if err := r.Get(ctx, req.NamespacedName, g); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	message, _, _ := unstructured.NestedString(g.Object, "spec", "message")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: g.GetNamespace(), Name: g.GetName() + "-greeting"}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"message": message}
		return controllerutil.SetControllerReference(g, cm, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	if ready, _, _ := unstructured.NestedBool(g.Object, "status", "ready"); ready {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(g.DeepCopy())
	if err := unstructured.SetNestedField(g.Object, true, "status", "ready"); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.Status().Patch(ctx, g, patch)
}

func main() {
	ctrl.SetLogger(zap.New())
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		// Several fixtures may run on one machine: no ports to collide.
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		ctrl.Log.Error(err, "cannot create the manager")
		os.Exit(1)
	}
	g := &unstructured.Unstructured{}
	g.SetGroupVersionKind(greeting)
	if err := ctrl.NewControllerManagedBy(mgr).For(g).Owns(&corev1.ConfigMap{}).Named("greeting").
		Complete(&reconciler{Client: mgr.GetClient()}); err != nil {
		ctrl.Log.Error(err, "cannot create the controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
