// Package reset implements `labctl reset`: remove what the labs left in the
// cluster (Databases, Backups, the namespaces labctl created), wait until
// garbage collection has removed their children, and optionally redeploy
// the operator or recreate the whole cluster.
package reset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/userr"
)

// Labels labctl puts on what it creates (verify's namespaces).
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "labctl"
	// namespacePrefix is how verify names its namespaces.
	namespacePrefix = "labctl-"
)

// The lab's kinds, deleted in this order (a Backup refers to a Database).
var (
	Backups   = schema.GroupVersionResource{Group: "database.example.com", Version: "v1", Resource: "backups"}
	Databases = schema.GroupVersionResource{Group: "database.example.com", Version: "v1", Resource: "databases"}
)

// childKinds are where a Database's or Backup's children live; garbage
// collection removes those owned by a deleted object.
var childKinds = []schema.GroupVersionResource{
	{Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "secrets"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "persistentvolumeclaims"},
	{Group: "batch", Version: "v1", Resource: "jobs"},
	{Group: "batch", Version: "v1", Resource: "cronjobs"},
}

var (
	namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	pvcs       = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
)

// Options are the flags of `labctl reset`.
type Options struct {
	f *cmdutil.Factory

	Provider      string
	Name          string
	Namespace     string
	AllNamespaces bool
	Operator      bool
	Cluster       bool
	Force         bool
	Project       string
	Timeout       time.Duration

	// kinds overrides the lab's kinds (tests).
	kinds []schema.GroupVersionResource
}

// NewCommand returns the reset command; runF replaces the work in tests of
// flag parsing.
func NewCommand(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Delete the lab's objects (Databases, Backups, labctl namespaces) and wait for garbage collection",
		Long: `Delete what the labs left in the cluster and wait, watching, until garbage
collection has removed their children (StatefulSets, Services, Secrets, Jobs).

Deleted: Databases and Backups (database.example.com/v1) in the namespace
(default: "default"; every namespace with --all-namespaces), the data PVCs of
those Databases, and the namespaces labctl created (label
app.kubernetes.io/managed-by=labctl). Nothing else: leftovers labctl does not
recognise (a namespace named labctl-* without the label, a database
StatefulSet, Service or Secret that no Database owns) are listed and kept,
unless --force. --force also removes finalizers that keep a Database from
being deleted when no operator runs to remove them.

--operator redeploys the operator afterwards; --cluster deletes and recreates
the whole cluster instead.`,
		Example: `  labctl reset
  labctl reset --all-namespaces --operator
  labctl reset --cluster`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Name = cmdutil.ClusterName(cmd, o.Name)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Provider, "provider", cmdutil.ProviderAuto, "provider of the cluster (auto tries each)")
	cmd.Flags().StringVar(&o.Name, "name", cluster.DefaultName, "cluster name")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "default", "namespace whose Databases and Backups are deleted")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "delete Databases and Backups in every namespace")
	cmd.Flags().BoolVar(&o.Operator, "operator", false, "redeploy the operator afterwards")
	cmd.Flags().BoolVar(&o.Cluster, "cluster", false, "delete and recreate the whole cluster (then deploy the operator)")
	cmd.Flags().BoolVar(&o.Force, "force", false, "also delete leftovers labctl does not recognise, and remove stuck finalizers")
	cmd.Flags().StringVar(&o.Project, "project", "", "project to deploy with --operator/--cluster (default: the reference operator)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 2*time.Minute, "how long to wait for deletion and garbage collection")
	cmd.MarkFlagsMutuallyExclusive("cluster", "all-namespaces")
	cmd.MarkFlagsMutuallyExclusive("cluster", "force")
	return cmd
}

// Run does the work of `labctl reset`.
func Run(ctx context.Context, o *Options) error {
	s := o.f.IOStreams
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	c, err := o.f.Providers.FindCluster(ctx, o.Provider, o.Name)
	if err != nil {
		if errors.Is(err, cluster.ErrNotFound) {
			return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("there is no running cluster named %q to reset", o.Name),
				"run `labctl up` to create it (or pass --name / --provider)")
		}
		return err
	}
	if o.Cluster {
		return recreate(ctx, o, c)
	}
	res, err := clean(ctx, o, s, c.Config)
	if err != nil {
		return err
	}
	res.print(s)
	if o.Operator {
		if o.f.DeployOperator == nil {
			return userr.New("redeploying the operator is not available in this build", "run `labctl up`")
		}
		if err := o.f.DeployOperator(ctx, c, o.Project); err != nil {
			return err
		}
		fmt.Fprintln(s.Out, s.Styles().Success.Render("✓")+" operator redeployed")
	}
	return nil
}

func recreate(ctx context.Context, o *Options, c *cluster.Cluster) error {
	s := o.f.IOStreams
	prov, ok := o.f.Providers.ByName[c.Provider]
	if !ok {
		return userr.New(fmt.Sprintf("unknown provider %q for cluster %q", c.Provider, c.Name), "run `labctl down` and `labctl up`")
	}
	step := s.StartStep(fmt.Sprintf("Deleting %s cluster %q", prov.Name(), c.Name))
	if err := prov.Down(ctx, c.Name); err != nil {
		step.Fail()
		return err
	}
	step.Done()
	nc, err := prov.Up(ctx, cluster.UpOptions{Name: c.Name, Streams: s})
	if err != nil {
		return err
	}
	if o.f.DeployOperator != nil {
		if err := o.f.DeployOperator(ctx, nc, o.Project); err != nil {
			return err
		}
	}
	fmt.Fprintf(s.Out, "%s %s cluster %s recreated; kubectl context %s\n", s.Styles().Success.Render("✓"), prov.Name(), c.Name, nc.Context)
	return nil
}

// ref names one object.
type ref struct {
	gvr       schema.GroupVersionResource
	kind      string
	namespace string
	name      string
	uid       types.UID
}

func (r ref) String() string {
	if r.namespace == "" {
		return r.kind + " " + r.name
	}
	return r.kind + " " + r.namespace + "/" + r.name
}

func refOf(gvr schema.GroupVersionResource, u *unstructured.Unstructured) ref {
	return ref{gvr: gvr, kind: u.GetKind(), namespace: u.GetNamespace(), name: u.GetName(), uid: u.GetUID()}
}

// result is what a reset did.
type result struct {
	deleted   []ref // objects labctl deleted
	collected int   // children garbage collection removed
	kept      []ref // leftovers not recognised (kept without --force)
	absent    []string
}

func (r *result) print(s *iostreams.IOStreams) {
	st := s.Styles()
	if len(r.deleted) == 0 {
		fmt.Fprintln(s.Out, st.Success.Render("✓")+" nothing of the labs to delete")
	} else {
		counts := map[string]int{}
		var kinds []string
		for _, d := range r.deleted {
			if counts[d.kind] == 0 {
				kinds = append(kinds, d.kind)
			}
			counts[d.kind]++
		}
		var parts []string
		for _, k := range kinds {
			parts = append(parts, plural(counts[k], k))
		}
		fmt.Fprintf(s.Out, "%s deleted %s; garbage collection removed %s\n", st.Success.Render("✓"), strings.Join(parts, ", "), plural(r.collected, "dependent object"))
	}
	if len(r.absent) > 0 && len(r.deleted) == 0 {
		fmt.Fprintf(s.Out, "  %s\n", st.Muted.Render("(the cluster has no "+strings.Join(r.absent, "/")+" API: the lab's CRDs are not installed)"))
	}
	for _, k := range r.kept {
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
	o   *Options
	s   *iostreams.IOStreams
	cfg *rest.Config
	dyn dynamic.Interface
	res *result
}

// clean deletes the lab's objects and waits for them and their children
// to be gone.
func clean(ctx context.Context, o *Options, s *iostreams.IOStreams, cfg *rest.Config) (*result, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := &cleaner{o: o, s: s, cfg: cfg, dyn: dyn, res: &result{}}
	step := s.StartStep("Finding the lab's objects")
	plan, err := c.plan(ctx)
	if err != nil {
		step.Fail()
		return nil, err
	}
	step.Done(fmt.Sprintf("%d to delete, %d dependents", len(plan.delete), len(plan.children)))
	if len(plan.delete) == 0 {
		return c.res, nil
	}

	step = s.StartStep("Deleting")
	for _, r := range plan.delete {
		step.Update("%s", r)
		if err := c.delete(ctx, r); err != nil {
			step.Fail()
			return nil, err
		}
		c.res.deleted = append(c.res.deleted, r)
	}
	step.Done(fmt.Sprintf("%d objects", len(plan.delete)))

	step = s.StartStep("Waiting for deletion and garbage collection")
	if err := c.waitGone(ctx, step, plan); err != nil {
		step.Fail()
		return nil, err
	}
	step.Done()
	c.res.collected = len(plan.children)
	return c.res, nil
}

type plan struct {
	delete   []ref // in order
	children []ref // removed by garbage collection
	owners   []ref // Databases and Backups (may carry finalizers)
}

func (c *cleaner) kinds() []schema.GroupVersionResource {
	if c.o.kinds != nil {
		return c.o.kinds
	}
	return []schema.GroupVersionResource{Backups, Databases}
}

func (c *cleaner) list(ctx context.Context, gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions) ([]unstructured.Unstructured, error) {
	var ri dynamic.ResourceInterface = c.dyn.Resource(gvr)
	if ns != "" {
		ri = c.dyn.Resource(gvr).Namespace(ns)
	}
	l, err := ri.List(ctx, opts)
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
	if scope == "" && !c.o.AllNamespaces {
		scope = "default"
	}

	// Namespaces labctl created (deleted whole), and labctl-* ones it
	// cannot vouch for.
	nsList, err := c.list(ctx, namespaces, "", metav1.ListOptions{})
	if err != nil {
		return nil, apiError(err, "cannot list namespaces")
	}
	labctlNS := map[string]bool{}
	var nsDeletes []ref
	for i := range nsList {
		n := &nsList[i]
		r := refOf(namespaces, n)
		r.kind = "Namespace"
		switch {
		case n.GetLabels()[ManagedByLabel] == ManagedByValue:
			labctlNS[n.GetName()] = true
			nsDeletes = append(nsDeletes, r)
		case strings.HasPrefix(n.GetName(), namespacePrefix):
			if c.o.Force {
				labctlNS[n.GetName()] = true
				nsDeletes = append(nsDeletes, r)
			} else {
				c.res.kept = append(c.res.kept, r)
			}
		}
	}

	// Backups, then Databases, in scope (those inside labctl namespaces
	// go with their namespace, but are waited for: finalizers).
	nsTouched := map[string]bool{}
	deletedDBs := map[string][]string{} // namespace → Database names
	for _, gvr := range c.kinds() {
		items, err := c.list(ctx, gvr, scope, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || kube.IsNoMatch(err) {
			c.res.absent = append(c.res.absent, gvr.Resource)
			continue
		}
		if err != nil {
			return nil, apiError(err, "cannot list "+gvr.Resource)
		}
		// Also those in labctl namespaces outside the scope.
		if scope != "" {
			for ns := range labctlNS {
				more, err := c.list(ctx, gvr, ns, metav1.ListOptions{})
				if err == nil {
					items = append(items, more...)
				}
			}
		}
		sort.Slice(items, func(i, j int) bool {
			return items[i].GetNamespace()+"/"+items[i].GetName() < items[j].GetNamespace()+"/"+items[j].GetName()
		})
		for i := range items {
			u := &items[i]
			r := refOf(gvr, u)
			if u.GetKind() == "" {
				r.kind = kindName(gvr)
			}
			p.owners = append(p.owners, r)
			nsTouched[u.GetNamespace()] = true
			if !labctlNS[u.GetNamespace()] {
				p.delete = append(p.delete, r)
			}
			if gvr == Databases {
				deletedDBs[u.GetNamespace()] = append(deletedDBs[u.GetNamespace()], u.GetName())
			}
		}
	}

	// Children: objects owned by what is deleted, found by owner UID (the
	// course's Database children carry no labels of their own).
	owners := map[types.UID]bool{}
	for _, o := range p.owners {
		owners[o.uid] = true
	}
	for ns := range nsTouched {
		if labctlNS[ns] {
			continue // the namespace's deletion takes everything
		}
		for _, gvr := range childKinds {
			items, err := c.list(ctx, gvr, ns, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range items {
				u := &items[i]
				r := refOf(gvr, u)
				if r.kind == "" {
					r.kind = kindName(gvr)
				}
				owned := false
				for _, or := range u.GetOwnerReferences() {
					if owners[or.UID] {
						owned = true
					}
				}
				switch {
				case owned:
					p.children = append(p.children, r)
				case gvr == pvcs && isDataPVC(u, deletedDBs[ns]):
					// A StatefulSet's data volume outlives it; a new
					// Database of the same name would find the old data
					// (and its old password).
					p.delete = append(p.delete, r)
				case looksLikeDatabaseChild(gvr, u) && len(u.GetOwnerReferences()) == 0:
					if c.o.Force {
						p.delete = append(p.delete, r)
					} else {
						c.res.kept = append(c.res.kept, r)
					}
				}
			}
		}
	}
	// Unowned leftovers in the scope namespace even when no Database is
	// left there.
	if scope != "" && !nsTouched[scope] && !labctlNS[scope] {
		for _, gvr := range []schema.GroupVersionResource{childKinds[0], childKinds[2], childKinds[3]} {
			items, err := c.list(ctx, gvr, scope, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range items {
				u := &items[i]
				if looksLikeDatabaseChild(gvr, u) && len(u.GetOwnerReferences()) == 0 {
					r := refOf(gvr, u)
					if r.kind == "" {
						r.kind = kindName(gvr)
					}
					if c.o.Force {
						p.delete = append(p.delete, r)
					} else {
						c.res.kept = append(c.res.kept, r)
					}
				}
			}
		}
	}
	p.delete = append(p.delete, nsDeletes...)
	return p, nil
}

// isDataPVC: a PVC of a deleted Database's StatefulSet (labels
// app=database, database=<name>).
func isDataPVC(u *unstructured.Unstructured, dbs []string) bool {
	l := u.GetLabels()
	return l["app"] == "database" && slices.Contains(dbs, l["database"])
}

// looksLikeDatabaseChild recognises what a Database controller creates
// (selector app=database; Secret <db>-credentials) when no owner is left.
func looksLikeDatabaseChild(gvr schema.GroupVersionResource, u *unstructured.Unstructured) bool {
	switch gvr.Resource {
	case "statefulsets":
		v, _, _ := unstructured.NestedString(u.Object, "spec", "selector", "matchLabels", "app")
		return v == "database"
	case "services":
		v, _, _ := unstructured.NestedString(u.Object, "spec", "selector", "app")
		return v == "database"
	case "secrets":
		if !strings.HasSuffix(u.GetName(), "-credentials") {
			return false
		}
		data, _, _ := unstructured.NestedMap(u.Object, "data")
		_, user := data["username"]
		_, pass := data["password"]
		return user && pass
	}
	return false
}

func kindName(gvr schema.GroupVersionResource) string {
	switch gvr.Resource {
	case "databases":
		return "Database"
	case "backups":
		return "Backup"
	case "statefulsets":
		return "StatefulSet"
	case "deployments":
		return "Deployment"
	case "services":
		return "Service"
	case "secrets":
		return "Secret"
	case "configmaps":
		return "ConfigMap"
	case "persistentvolumeclaims":
		return "PersistentVolumeClaim"
	case "jobs":
		return "Job"
	case "cronjobs":
		return "CronJob"
	case "namespaces":
		return "Namespace"
	}
	return gvr.Resource
}

func (c *cleaner) resource(r ref) dynamic.ResourceInterface {
	if r.namespace == "" {
		return c.dyn.Resource(r.gvr)
	}
	return c.dyn.Resource(r.gvr).Namespace(r.namespace)
}

func (c *cleaner) delete(ctx context.Context, r ref) error {
	bg := metav1.DeletePropagationBackground
	pre := &metav1.Preconditions{UID: &r.uid}
	err := c.resource(r).Delete(ctx, r.name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: pre})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return apiError(err, "cannot delete "+r.String())
}

// waitGone watches until every deleted object, every owner and every child
// is gone. Databases kept by a finalizer nobody removes (no operator
// running) fail the reset, or with --force lose the finalizer.
func (c *cleaner) waitGone(ctx context.Context, step *iostreams.Step, p *plan) error {
	deadline := time.Now().Add(c.o.Timeout)
	var all []ref
	all = append(all, p.delete...)
	for _, o := range p.owners {
		if !slices.ContainsFunc(all, func(r ref) bool { return r.uid == o.uid }) {
			all = append(all, o)
		}
	}
	all = append(all, p.children...)
	// Owners first: a stuck finalizer is the usual reason for waiting.
	sort.SliceStable(all, func(i, j int) bool { return rank(all[i]) < rank(all[j]) })
	for i, r := range all {
		step.Update("%d/%d gone; waiting for %s", i, len(all), r)
		d := deadline
		if c.o.Force && rank(r) != 1 {
			// Give a running operator a moment to clean up and remove
			// its finalizer before taking it away.
			d = minTime(deadline, time.Now().Add(forceGrace))
		}
		err := c.waitOne(ctx, r, d)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if (r.gvr == Databases || r.gvr == Backups || r.gvr == namespaces) && c.o.Force {
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

// forceGrace is how long --force lets finalizers run before removing them.
var forceGrace = 10 * time.Second

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func rank(r ref) int {
	switch r.gvr {
	case Backups, Databases:
		return 0
	case namespaces:
		return 2
	}
	return 1
}

func (c *cleaner) waitOne(ctx context.Context, r ref, deadline time.Time) error {
	timeout := time.Until(deadline)
	if timeout < time.Second {
		timeout = time.Second
	}
	_, err := kube.WaitFor(ctx, c.cfg, r.gvr, r.namespace, r.name, timeout, func(u *unstructured.Unstructured) (bool, error) {
		// Gone, or replaced by a new object of the same name (an operator
		// recreating a child is not what we wait for).
		return u == nil || u.GetUID() != r.uid, nil
	})
	return err
}

// stripFinalizers removes the finalizers of every Database and Backup
// being deleted (theirs and those in deleted namespaces).
func (c *cleaner) stripFinalizers(ctx context.Context, p *plan) error {
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	for _, o := range p.owners {
		u, err := c.resource(o).Get(ctx, o.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return apiError(err, "cannot read "+o.String())
		}
		if u.GetDeletionTimestamp() == nil || len(u.GetFinalizers()) == 0 {
			continue
		}
		if _, err := c.resource(o).Patch(ctx, o.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return apiError(err, "cannot remove the finalizers of "+o.String())
		}
		fmt.Fprintf(c.s.ErrOut, "%s removed finalizers %s from %s\n", c.s.Styles().Warning.Render("!"), strings.Join(u.GetFinalizers(), ", "), o)
	}
	return nil
}

// stuckError explains what is still there.
func (c *cleaner) stuckError(ctx context.Context, r ref, cause error) error {
	u, err := c.resource(r).Get(context.WithoutCancel(ctx), r.name, metav1.GetOptions{})
	if err == nil && len(u.GetFinalizers()) > 0 {
		return userr.Wrap(cause, userr.ExitFailure,
			fmt.Sprintf("%s is still being deleted after %s: finalizer %s was not removed", r, c.o.Timeout, strings.Join(u.GetFinalizers(), ", ")),
			"the operator removes it: start the operator (`labctl up`), or run `labctl reset --force` to remove the finalizer")
	}
	if r.gvr == namespaces {
		return userr.Wrap(cause, userr.ExitFailure,
			fmt.Sprintf("%s is still terminating after %s", r, c.o.Timeout),
			fmt.Sprintf("objects with finalizers are left in it (`kubectl get databases,backups -n %s`); `labctl reset --force` removes their finalizers", r.name))
	}
	return userr.Wrap(cause, userr.ExitFailure,
		fmt.Sprintf("%s was not removed within %s", r, c.o.Timeout),
		"garbage collection may be slow on a loaded machine: run `labctl reset` again, or pass a longer --timeout")
}

func apiError(err error, what string) error {
	return userr.Wrap(err, userr.ExitFailure, what+": "+userr.Message(err), "check that the cluster is running (`labctl status`)")
}
