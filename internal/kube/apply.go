package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager owns the fields labctl applies.
const FieldManager = "labctl"

// Applier applies objects with server-side apply.
type Applier struct {
	cfg    *rest.Config
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
}

// NewApplier returns an Applier for cfg.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{cfg: cfg, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}, nil
}

// Skipped is an object that was not applied because the cluster does not
// serve its kind (e.g. cert-manager's Certificate without cert-manager).
type Skipped struct {
	Object *unstructured.Unstructured
	Reason string
}

// Apply applies objs in order. CRDs are waited for (Established) before
// objects that may need them. Kinds the cluster does not serve are
// returned as skipped rather than failing the whole apply.
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured) ([]Skipped, error) {
	var skipped []Skipped
	var crds []string
	for i, obj := range objs {
		if len(crds) > 0 && obj.GetKind() != "CustomResourceDefinition" {
			if err := a.WaitEstablished(ctx, crds); err != nil {
				return skipped, err
			}
			crds = nil
		}
		if err := a.ApplyOne(ctx, obj); err != nil {
			if meta.IsNoMatchError(err) {
				skipped = append(skipped, Skipped{Object: obj, Reason: fmt.Sprintf("the cluster does not serve %s", obj.GroupVersionKind().GroupKind())})
				continue
			}
			return skipped, fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, obj.GetName())
			if i == len(objs)-1 {
				return skipped, a.WaitEstablished(ctx, crds)
			}
		}
	}
	return skipped, nil
}

// ApplyOne server-side applies one object, forcing ownership of its fields.
func (a *Applier) ApplyOne(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset() // a CRD applied a moment ago may serve it now
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	var res dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		res = a.dyn.Resource(m.Resource).Namespace(ns)
	}
	_, err = res.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: ptrTrue()})
	if roleRefChanged(obj, err) {
		// A binding's roleRef cannot change in place: replace the binding,
		// as `kubectl auth reconcile` and `kubectl apply --force` do.
		if err := res.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		_, err = res.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: ptrTrue()})
	}
	return err
}

// roleRefChanged: err is the API server refusing to change a
// RoleBinding's or ClusterRoleBinding's roleRef.
func roleRefChanged(obj *unstructured.Unstructured, err error) bool {
	if !apierrors.IsInvalid(err) || obj.GroupVersionKind().Group != "rbac.authorization.k8s.io" ||
		(obj.GetKind() != "RoleBinding" && obj.GetKind() != "ClusterRoleBinding") {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if strings.HasPrefix(cause.Field, "roleRef") {
			return true
		}
	}
	return false
}

// WaitEstablished waits until each named CRD is Established.
func (a *Applier) WaitEstablished(ctx context.Context, names []string) error {
	for _, n := range names {
		if _, err := WaitFor(ctx, a.cfg, apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"), "", n, time.Minute,
			StatusCondition("Established", "True")); err != nil {
			return fmt.Errorf("CRD %s did not become established: %w", n, err)
		}
	}
	a.mapper.Reset()
	return nil
}

func ptrTrue() *bool { t := true; return &t }
