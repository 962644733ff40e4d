package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ObjectRef names an applied object.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func (r ObjectRef) String() string {
	if r.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name)
	}
	return r.Kind + " " + r.Name
}

// RefsOf names objs.
func RefsOf(objs []*unstructured.Unstructured) []ObjectRef {
	refs := make([]ObjectRef, 0, len(objs))
	for _, o := range objs {
		refs = append(refs, ObjectRef{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()})
	}
	return refs
}

// neverPruned are the kinds Prune leaves in place: deleting a CRD deletes
// every object of it, deleting a Namespace everything in it — a student's
// Databases too.
var neverPruned = map[string]bool{"CustomResourceDefinition": true, "Namespace": true}

// Prune deletes the objects an earlier apply made (prev) that this one
// (cur) no longer has, as `kubectl apply --prune` does: a ClusterRoleBinding
// taken out of a project's config/ must not go on granting what it did.
// Objects already gone, and kinds the cluster no longer serves, are
// passed over. It returns what it deleted.
func (a *Applier) Prune(ctx context.Context, prev, cur []ObjectRef) ([]ObjectRef, error) {
	keep := map[ObjectRef]bool{}
	for _, r := range cur {
		keep[r] = true
	}
	var pruned []ObjectRef
	for _, r := range prev {
		if keep[r] || neverPruned[r.Kind] {
			continue
		}
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			return pruned, fmt.Errorf("prune %s: %w", r, err)
		}
		m, err := a.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: r.Kind}, gv.Version)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return pruned, fmt.Errorf("prune %s: %w", r, err)
		}
		var res dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := r.Namespace
			if ns == "" {
				ns = "default"
			}
			res = a.dyn.Resource(m.Resource).Namespace(ns)
		}
		switch err := res.Delete(ctx, r.Name, metav1.DeleteOptions{}); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return pruned, fmt.Errorf("prune %s: %w", r, err)
		default:
			pruned = append(pruned, r)
		}
	}
	return pruned, nil
}
