// Package reset removes what the labs left in a cluster: every object of a
// lab's own kind (the lab definitions say which kinds, and in which order),
// the namespaces labctl created, and the data volumes of the StatefulSets
// those objects owned; then it waits, watching, until garbage collection
// has removed their children. Children are whatever carries an owner
// reference to a deleted object, in any resource the API server lists: no
// table of kinds, no names or labels of one operator.
package reset

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/userr"
)

// Defaults of Options.
const (
	DefaultTimeout    = 2 * time.Minute
	DefaultForceGrace = 10 * time.Second
)

var (
	namespaces   = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	pvcs         = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	statefulSets = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
)

// Options say what to reset and where.
type Options struct {
	// Config reaches the cluster.
	Config *rest.Config
	// Labs are the lab definitions whose kinds are deleted (all of them:
	// reset does not know which lab a user did).
	Labs []*labs.Lab
	// Namespace whose lab objects are deleted ("" is "default"), unless
	// AllNamespaces. labctl's own namespaces go whatever the scope.
	Namespace     string
	AllNamespaces bool
	// Force also deletes leftovers labctl does not recognise as its own
	// and removes finalizers nobody else removes.
	Force bool
	// Timeout bounds the wait for deletion and garbage collection.
	Timeout time.Duration
	// ForceGrace is how long --force lets a running operator remove its
	// finalizers before taking them away.
	ForceGrace time.Duration
	// Streams show progress and the finalizers removed.
	Streams *iostreams.IOStreams
}

// Ref names one object.
type Ref struct {
	GVR       schema.GroupVersionResource
	Kind      string
	Namespace string
	Name      string
	UID       types.UID
	role      role
}

// role says why an object is in the plan; it orders the wait.
type role int

const (
	labObject role = iota // a lab kind's object (may carry finalizers)
	other                 // a child, a data volume, a leftover
	namespace             // a namespace labctl created
)

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// Result is what a reset did.
type Result struct {
	// Deleted are the objects reset deleted, in order.
	Deleted []Ref
	// Collected counts the children garbage collection removed.
	Collected int
	// Kept are leftovers not recognised (kept without Force).
	Kept []Ref
	// Absent are the lab kinds the cluster has no API for.
	Absent []string
}

// Print reports the result, one line per fact.
func (r *Result) Print(s *iostreams.IOStreams) {
	st := s.Styles()
	if len(r.Deleted) == 0 {
		fmt.Fprintln(s.Out, st.Success.Render("✓")+" nothing of the labs to delete")
	} else {
		counts := map[string]int{}
		var kinds []string
		for _, d := range r.Deleted {
			if counts[d.Kind] == 0 {
				kinds = append(kinds, d.Kind)
			}
			counts[d.Kind]++
		}
		var parts []string
		for _, k := range kinds {
			parts = append(parts, plural(counts[k], k))
		}
		fmt.Fprintf(s.Out, "%s deleted %s; garbage collection removed %s\n", st.Success.Render("✓"), strings.Join(parts, ", "), plural(r.Collected, "dependent object"))
	}
	if len(r.Absent) > 0 && len(r.Deleted) == 0 {
		fmt.Fprintf(s.Out, "  %s\n", st.Muted.Render("(the cluster has no "+strings.Join(r.Absent, "/")+" API: the lab's CRDs are not installed)"))
	}
	for _, k := range r.Kept {
		fmt.Fprintf(s.Out, "%s kept %s: labctl did not create it (--force deletes it)\n", st.Warning.Render("!"), k)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	switch {
	case strings.HasSuffix(what, "s"):
		return fmt.Sprintf("%d %ses", n, what)
	case strings.HasSuffix(what, "y") && !strings.HasSuffix(what, "ey"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(what, "y"))
	}
	return fmt.Sprintf("%d %ss", n, what)
}

type cleaner struct {
	o      Options
	s      *iostreams.IOStreams
	dyn    dynamic.Interface
	meta   metadata.Interface
	disc   discovery.DiscoveryInterface
	mapper meta.RESTMapper
	res    *Result
	// labResources are the lab kinds the cluster serves, in deletion
	// order.
	labResources []labResource
}

type labResource struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

// Run deletes the labs' objects and waits for them and their children to
// be gone.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ForceGrace <= 0 {
		o.ForceGrace = DefaultForceGrace
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	s := o.Streams
	c := &cleaner{o: o, s: s, res: &Result{}}
	var err error
	if c.dyn, err = dynamic.NewForConfig(o.Config); err != nil {
		return nil, err
	}
	// Listing every resource for children touches deprecated ones (v1
	// Endpoints): their warnings would say nothing useful to the user.
	quiet := rest.CopyConfig(o.Config)
	quiet.WarningHandler = rest.NoWarnings{}
	if c.meta, err = metadata.NewForConfig(quiet); err != nil {
		return nil, err
	}
	if c.disc, err = discovery.NewDiscoveryClientForConfig(o.Config); err != nil {
		return nil, err
	}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.disc))

	step := s.StartStep("Finding the lab's objects")
	p, err := c.plan(ctx)
	if err != nil {
		step.Fail()
		return nil, err
	}
	step.Done(fmt.Sprintf("%d to delete, %d dependents", len(p.delete), len(p.children)))
	if len(p.delete) == 0 {
		return c.res, nil
	}

	step = s.StartStep("Deleting")
	for _, r := range p.delete {
		step.Update("%s", r)
		if err := c.deleteOne(ctx, r); err != nil {
			step.Fail()
			return nil, err
		}
		c.res.Deleted = append(c.res.Deleted, r)
	}
	step.Done(fmt.Sprintf("%d objects", len(p.delete)))

	step = s.StartStep("Waiting for deletion and garbage collection")
	if err := c.waitGone(ctx, step, p); err != nil {
		step.Fail()
		return nil, err
	}
	step.Done()
	c.res.Collected = len(p.children)
	return c.res, nil
}

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

func (c *cleaner) resource(r Ref) dynamic.ResourceInterface {
	if r.Namespace == "" {
		return c.dyn.Resource(r.GVR)
	}
	return c.dyn.Resource(r.GVR).Namespace(r.Namespace)
}

func (c *cleaner) deleteOne(ctx context.Context, r Ref) error {
	bg := metav1.DeletePropagationBackground
	pre := &metav1.Preconditions{UID: &r.UID}
	err := c.resource(r).Delete(ctx, r.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: pre})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return kube.APIError(err, "cannot delete "+r.String())
}

// waitGone watches until every deleted object, every owner and every child
// is gone. Lab objects kept by a finalizer nobody removes (no operator
// running) fail the reset, or with Force lose the finalizer.
func (c *cleaner) waitGone(ctx context.Context, step *iostreams.Step, p *plan) error {
	deadline := time.Now().Add(c.o.Timeout)
	var all []Ref
	all = append(all, p.delete...)
	for _, o := range p.owners {
		if !slices.ContainsFunc(all, func(r Ref) bool { return r.UID == o.UID }) {
			all = append(all, o)
		}
	}
	all = append(all, p.children...)
	// Owners first: a stuck finalizer is the usual reason for waiting.
	sort.SliceStable(all, func(i, j int) bool { return all[i].role < all[j].role })
	for i, r := range all {
		step.Update("%d/%d gone; waiting for %s", i, len(all), r)
		d := deadline
		if c.o.Force && r.role != other {
			// Give a running operator a moment to clean up and remove
			// its finalizer before taking it away.
			if grace := time.Now().Add(c.o.ForceGrace); grace.Before(d) {
				d = grace
			}
		}
		err := c.waitOne(ctx, r, d)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if r.role != other && c.o.Force {
			step.Update("removing finalizers")
			if err := c.stripFinalizers(ctx, p); err != nil {
				return err
			}
			if err := c.waitOne(ctx, r, time.Now().Add(c.o.Timeout)); err == nil {
				continue
			}
		}
		return c.stuckError(ctx, r, err)
	}
	return nil
}

func (c *cleaner) waitOne(ctx context.Context, r Ref, deadline time.Time) error {
	timeout := max(time.Until(deadline), time.Second)
	_, err := kube.WaitFor(ctx, c.o.Config, r.GVR, r.Namespace, r.Name, timeout, func(u *unstructured.Unstructured) (bool, error) {
		// Gone, or replaced by a new object of the same name (an operator
		// recreating a child is not what we wait for).
		return u == nil || u.GetUID() != r.UID, nil
	})
	return err
}

// stripFinalizers removes the finalizers of every lab object being
// deleted (theirs and those in deleted namespaces).
func (c *cleaner) stripFinalizers(ctx context.Context, p *plan) error {
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	for _, o := range p.owners {
		u, err := c.resource(o).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return kube.APIError(err, "cannot read "+o.String())
		}
		if u.GetDeletionTimestamp() == nil || len(u.GetFinalizers()) == 0 {
			continue
		}
		if _, err := c.resource(o).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return kube.APIError(err, "cannot remove the finalizers of "+o.String())
		}
		fmt.Fprintf(c.s.ErrOut, "%s removed finalizers %s from %s\n", c.s.Styles().Warning.Render("!"), strings.Join(u.GetFinalizers(), ", "), o)
	}
	return nil
}

// stuckError explains what is still there.
func (c *cleaner) stuckError(ctx context.Context, r Ref, cause error) error {
	u, err := c.resource(r).Get(context.WithoutCancel(ctx), r.Name, metav1.GetOptions{})
	if err == nil && len(u.GetFinalizers()) > 0 {
		return userr.Wrap(cause, userr.ExitFailure,
			fmt.Sprintf("%s is still being deleted after %s: finalizer %s was not removed", r, c.o.Timeout, strings.Join(u.GetFinalizers(), ", ")),
			"the operator removes it: start the operator (`labctl up`), or run `labctl reset --force` to remove the finalizer")
	}
	if r.role == namespace {
		var resources []string
		for _, lr := range c.labResources {
			if lr.namespaced {
				resources = append(resources, lr.gvr.Resource)
			}
		}
		return userr.Wrap(cause, userr.ExitFailure,
			fmt.Sprintf("%s is still terminating after %s", r, c.o.Timeout),
			fmt.Sprintf("objects with finalizers are left in it (`kubectl get %s -n %s`); `labctl reset --force` removes their finalizers", strings.Join(resources, ","), r.Name))
	}
	return userr.Wrap(cause, userr.ExitFailure,
		fmt.Sprintf("%s was not removed within %s", r, c.o.Timeout),
		"garbage collection may be slow on a loaded machine: run `labctl reset` again, or pass a longer --timeout")
}
