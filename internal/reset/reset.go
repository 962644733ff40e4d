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
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
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
