// What reset deletes: the labs' kinds, their objects, their children and data volumes, and leftovers, in order.

package reset

import (
	"context"
	"regexp"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"

	"github.com/labctl/labctl/internal/kube"
)

type plan struct {
	delete   []Ref // in order
	children []Ref // removed by garbage collection
	owners   []Ref // the lab objects (may carry finalizers)
}

// resolveLabKinds maps the labs' kinds to the resources the cluster
// serves; those it does not serve are Absent.
func (c *cleaner) resolveLabKinds() error {
	kinds, err := LabKinds(c.o.Labs)
	if err != nil {
		return err
	}
	for _, gvk := range kinds {
		m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if kube.IsNoMatch(err) {
			c.res.Absent = append(c.res.Absent, gvk.Kind)
			continue
		}
		if err != nil {
			return kube.APIError(err, "cannot look up the "+gvk.Kind+" API")
		}
		c.labResources = append(c.labResources, labResource{gvr: m.Resource, kind: gvk.Kind, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace})
	}
	return nil
}

func (c *cleaner) list(ctx context.Context, gvr schema.GroupVersionResource, ns string) ([]unstructured.Unstructured, error) {
	l, err := c.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (c *cleaner) plan(ctx context.Context) (*plan, error) {
	p := &plan{}
	scope := c.o.Namespace
	if c.o.AllNamespaces {
		scope = ""
	}
	if err := c.resolveLabKinds(); err != nil {
		return nil, err
	}

	// Namespaces labctl created (deleted whole), and labctl-* ones it
	// cannot vouch for.
	nsList, err := c.list(ctx, namespaces, "")
	if err != nil {
		return nil, kube.APIError(err, "cannot list namespaces")
	}
	labctlNS := map[string]bool{}
	var nsDeletes []Ref
	for i := range nsList {
		n := &nsList[i]
		r := Ref{GVR: namespaces, Kind: "Namespace", Name: n.GetName(), UID: n.GetUID(), role: namespace}
		switch {
		case n.GetLabels()[kube.ManagedByLabel] == kube.ManagedByValue:
			labctlNS[n.GetName()] = true
			nsDeletes = append(nsDeletes, r)
		case strings.HasPrefix(n.GetName(), kube.NamespacePrefix):
			if c.o.Force {
				labctlNS[n.GetName()] = true
				nsDeletes = append(nsDeletes, r)
			} else {
				c.res.Kept = append(c.res.Kept, r)
			}
		}
	}

	// The lab objects in scope, kind by kind in order (those inside
	// labctl namespaces go with their namespace, but are waited for:
	// finalizers).
	nsTouched := map[string]bool{}
	for _, lr := range c.labResources {
		ns := scope
		if !lr.namespaced {
			ns = ""
		}
		items, err := c.list(ctx, lr.gvr, ns)
		if apierrors.IsNotFound(err) || kube.IsNoMatch(err) {
			c.res.Absent = append(c.res.Absent, lr.kind)
			continue
		}
		if err != nil {
			return nil, kube.APIError(err, "cannot list "+lr.gvr.Resource)
		}
		if ns != "" {
			for labNS := range labctlNS {
				if more, err := c.list(ctx, lr.gvr, labNS); err == nil {
					items = append(items, more...)
				}
			}
		}
		sort.Slice(items, func(i, j int) bool {
			return items[i].GetNamespace()+"/"+items[i].GetName() < items[j].GetNamespace()+"/"+items[j].GetName()
		})
		for i := range items {
			u := &items[i]
			r := Ref{GVR: lr.gvr, Kind: lr.kind, Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), role: labObject}
			p.owners = append(p.owners, r)
			if u.GetNamespace() != "" {
				nsTouched[u.GetNamespace()] = true
			}
			if !labctlNS[u.GetNamespace()] {
				p.delete = append(p.delete, r)
			}
		}
	}

	// Where to look for children and leftovers: the namespaces whose lab
	// objects are deleted one by one, and the scope (leftovers may
	// outlive every lab object there).
	var look []string
	for ns := range nsTouched {
		if !labctlNS[ns] { // the namespace's deletion takes everything
			look = append(look, ns)
		}
	}
	if scope != "" && !nsTouched[scope] && !labctlNS[scope] {
		look = append(look, scope)
	}
	sort.Strings(look)
	if len(look) == 0 {
		p.delete = append(p.delete, nsDeletes...)
		return p, nil
	}
	if err := c.planChildren(ctx, p, look); err != nil {
		return nil, err
	}
	if err := c.planLeftovers(ctx, p, look); err != nil {
		return nil, err
	}
	p.delete = append(p.delete, nsDeletes...)
	return p, nil
}

// planChildren finds the objects owned by a lab object, in every
// namespaced resource the API server can list and delete, and the data
// volumes of the StatefulSets among them.
func (c *cleaner) planChildren(ctx context.Context, p *plan, look []string) error {
	owners := map[types.UID]bool{}
	for _, o := range p.owners {
		owners[o.UID] = true
	}
	if len(owners) == 0 {
		return nil
	}
	lists, err := c.disc.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		// A partial answer (one aggregated API down) still names the
		// built-in resources; no answer at all is an error.
		return kube.APIError(err, "cannot discover the cluster's resources")
	}
	lists = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "delete"}}, lists)
	var sets []Ref
	for _, ns := range look {
		for _, l := range lists {
			gv, err := schema.ParseGroupVersion(l.GroupVersion)
			if err != nil {
				continue
			}
			for _, ar := range l.APIResources {
				if strings.Contains(ar.Name, "/") {
					continue // a subresource
				}
				gvr := gv.WithResource(ar.Name)
				items, err := c.meta.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					continue // a resource this user may not list holds nothing of ours
				}
				for i := range items.Items {
					m := &items.Items[i]
					if !slices.ContainsFunc(m.OwnerReferences, func(or metav1.OwnerReference) bool { return owners[or.UID] }) {
						continue
					}
					r := Ref{GVR: gvr, Kind: ar.Kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID, role: other}
					p.children = append(p.children, r)
					if gv.Group == statefulSets.Group && ar.Kind == statefulSets.Kind {
						sets = append(sets, r)
					}
				}
			}
		}
	}
	return c.planDataVolumes(ctx, p, sets)
}

// planDataVolumes adds the PVCs of the StatefulSets being collected: a
// StatefulSet's volume claims outlive it (they carry its selector's labels
// and are named <claim>-<set>-<ordinal>, but no owner reference), and a new
// object of the same name would find the old data.
func (c *cleaner) planDataVolumes(ctx context.Context, p *plan, sets []Ref) error {
	for _, set := range sets {
		u, err := c.dyn.Resource(set.GVR).Namespace(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return kube.APIError(err, "cannot read "+set.String())
		}
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
		if len(sel) == 0 {
			continue
		}
		claims, err := c.list(ctx, pvcs, set.Namespace)
		if err != nil {
			return kube.APIError(err, "cannot list the PersistentVolumeClaims in "+set.Namespace)
		}
		name := regexp.MustCompile(`^.+-` + regexp.QuoteMeta(set.Name) + `-[0-9]+$`)
		for i := range claims {
			pvc := &claims[i]
			if !name.MatchString(pvc.GetName()) || !containsAll(pvc.GetLabels(), sel) || len(pvc.GetOwnerReferences()) > 0 {
				continue
			}
			r := Ref{GVR: pvcs, Kind: "PersistentVolumeClaim", Namespace: pvc.GetNamespace(), Name: pvc.GetName(), UID: pvc.GetUID(), role: other}
			if !slices.ContainsFunc(p.delete, func(d Ref) bool { return d.UID == r.UID }) {
				p.delete = append(p.delete, r)
			}
		}
	}
	return nil
}

// planLeftovers finds what the labs declare as their operators' leftovers
// with no owner left: kept, or deleted under Force.
func (c *cleaner) planLeftovers(ctx context.Context, p *plan, look []string) error {
	los, err := leftovers(c.o.Labs)
	if err != nil {
		return err
	}
	seen := map[types.UID]bool{}
	for _, r := range p.delete {
		seen[r.UID] = true
	}
	for _, lo := range los {
		m, err := c.mapper.RESTMapping(lo.gvk.GroupKind(), lo.gvk.Version)
		if err != nil {
			continue // not served: nothing of that kind can be left
		}
		for _, ns := range look {
			items, err := c.list(ctx, m.Resource, ns)
			if err != nil {
				continue
			}
			for i := range items {
				u := &items[i]
				if seen[u.GetUID()] || len(u.GetOwnerReferences()) > 0 || !lo.matches(u) {
					continue
				}
				seen[u.GetUID()] = true
				r := Ref{GVR: m.Resource, Kind: lo.gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), role: other}
				if c.o.Force {
					p.delete = append(p.delete, r)
				} else {
					c.res.Kept = append(c.res.Kept, r)
				}
			}
		}
	}
	return nil
}
