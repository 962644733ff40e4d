package checks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/report"
)

// Definition is a check written in Go, usable from lab YAML as
// `check: {name: NAME, with: {...}}`.
type Definition struct {
	Name string
	// Doc is one line for people reading the lab YAML.
	Doc string
	// Namespaced checks drive or read the run's namespace.
	Namespaced bool
	// OwnMachine checks read the machine verify runs on (a tool the
	// student installed there): a grader's machine, or a Classroom
	// runner, is not the student's, so ForGrading leaves their tasks out.
	OwnMachine bool
	// Params returns a pointer to a fresh parameter struct; the YAML's
	// `with` is decoded into it strictly. Nil: the check takes none. If the
	// struct has a `Validate() error` method it is called. Typed sets it
	// and Run for a check with parameters.
	Params func() any
	// Run does the check. It bounds its own waits by c.Timeout.
	Run func(ctx context.Context, c *Context, params any) Outcome
}

// Typed completes a definition whose check takes parameters of type P:
// each use decodes `with` into a fresh *P, and run gets it typed, so the
// one type assertion is here rather than in every check.
func Typed[P any](d Definition, run func(ctx context.Context, c *Context, p *P) Outcome) Definition {
	d.Params = func() any { return new(P) }
	d.Run = func(ctx context.Context, c *Context, p any) Outcome { return run(ctx, c, p.(*P)) }
	return d
}

var registry = map[string]Definition{}

// Register adds a check; it panics on a duplicate name (a programming
// error found by any test).
func Register(d Definition) {
	if _, dup := registry[d.Name]; dup {
		panic("checks: duplicate check " + d.Name)
	}
	registry[d.Name] = d
}

// Names lists the registered checks.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Validate checks a lab completely: its structure (labs.Lab.Validate) and
// every check step's name and parameters.
func Validate(lab *labs.Lab) error {
	if err := lab.Validate(); err != nil {
		return fmt.Errorf("lab %s: %w", lab.ID, err)
	}
	var errs []error
	for _, sc := range lab.Scenarios {
		for _, st := range sc.Steps {
			if st.Check == nil {
				continue
			}
			def, ok := registry[st.Check.Name]
			if !ok {
				errs = append(errs, fmt.Errorf("scenario %s step %s: unknown check %q (known: %v)", sc.Name, st.ID, st.Check.Name, Names()))
				continue
			}
			if _, err := decodeParams(def, st.Check.With); err != nil {
				errs = append(errs, fmt.Errorf("scenario %s step %s: %w", sc.Name, st.ID, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab %s: %w", lab.ID, err)
	}
	return nil
}

func decodeParams(def Definition, raw json.RawMessage) (any, error) {
	if def.Params == nil {
		if len(raw) > 0 && string(raw) != "null" && string(raw) != "{}" {
			return nil, fmt.Errorf("check %s takes no parameters", def.Name)
		}
		return nil, nil
	}
	p := def.Params()
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(p); err != nil {
			return nil, fmt.Errorf("check %s: parameters: %w", def.Name, err)
		}
	}
	if v, ok := p.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("check %s: parameters: %w", def.Name, err)
		}
	}
	return p, nil
}

// Outcome is what a check found.
type Outcome struct {
	Status             report.Result
	Message            string
	Expected, Observed string
	// Object is the last observed object (trimmed for the report).
	Object *unstructured.Unstructured
	// Related names objects whose events and operator log lines are
	// evidence when the check does not pass.
	Related []string
	Notes   []string
	// Excuse, set with a warning for a course bug's signature (labs.Stuck),
	// says why the scenario's later failures are warnings too.
	Excuse string
}

func pass(format string, args ...any) Outcome {
	return Outcome{Status: report.Pass, Message: fmt.Sprintf(format, args...)}
}

func fail(format string, args ...any) Outcome {
	return Outcome{Status: report.Fail, Message: fmt.Sprintf(format, args...)}
}

func errorf(format string, args ...any) Outcome {
	return Outcome{Status: report.Error, Message: fmt.Sprintf(format, args...)}
}

func skip(format string, args ...any) Outcome {
	return Outcome{Status: report.Skipped, Message: fmt.Sprintf(format, args...)}
}

// Context is what a Go check sees of the run.
type Context struct {
	run  *run
	scn  *scenario
	Step *labs.Step
	// Timeout bounds the check's waits (per profile, from the YAML).
	Timeout time.Duration
}

// Namespace is the run's namespace.
func (c *Context) Namespace() string { return c.run.ns }

// Client is an admin client without a cache.
func (c *Context) Client() client.Client { return c.run.client }

// Dynamic is an admin dynamic client.
func (c *Context) Dynamic() dynamic.Interface { return c.run.dyn }

// Config is the admin rest config.
func (c *Context) Config() *rest.Config { return c.run.cfg }

// Env tells what the cluster can do.
func (c *Context) Env() cluster.Env { return c.run.o.Cluster.Env }

// Operator is the operator under test, or nil.
func (c *Context) Operator() *operator.Operator { return c.run.o.Operator }

// ProjectDir is the operator's source directory, or "".
func (c *Context) ProjectDir() string { return c.run.o.ProjectDir }

// Profile is labs.ProfileLocal or labs.ProfileKind.
func (c *Context) Profile() string { return c.run.profile }

// Lab is the lab being verified.
func (c *Context) Lab() *labs.Lab { return c.run.lab }

// Started is when the run began.
func (c *Context) Started() time.Time { return c.run.started }

// Mark returns the time recorded by a step's `mark`.
func (c *Context) Mark(name string) (time.Time, bool) {
	if c.scn == nil {
		return time.Time{}, false
	}
	c.scn.mu.Lock()
	defer c.scn.mu.Unlock()
	t, ok := c.scn.marks[name]
	return t, ok
}

// Resolve maps a ref's kind to its GroupVersionResource.
func (c *Context) Resolve(ref labs.Ref) (schema.GroupVersionResource, error) {
	_, gvr, _, err := c.run.gvr(ref.Kind)
	return gvr, err
}

// History returns the states recorded for ref (the scenario must record
// it). It first lets the recorder catch up with the object as the API
// server has it now, so a state another step just observed is in the
// history; an object already deleted has nothing to catch up with.
func (c *Context) History(ctx context.Context, ref labs.Ref) ([]Observed, error) {
	if c.scn == nil {
		return nil, fmt.Errorf("the scenario must record %s", ref)
	}
	rec, ok := c.scn.recorders[ref.String()]
	if !ok {
		return nil, fmt.Errorf("the scenario must record %s", ref)
	}
	gvr, err := c.Resolve(ref)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cur, err := c.run.dyn.Resource(gvr).Namespace(c.run.ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", ref, err)
	default:
		if rv, err := strconv.ParseInt(cur.GetResourceVersion(), 10, 64); err == nil {
			// A history that misses the state just read would judge an
			// incomplete story: say so rather than read it.
			if !rec.waitRV(ctx, rv, 2*time.Second) {
				return nil, fmt.Errorf("the watch recording %s had not seen its current state (resourceVersion %d) after 2s", ref, rv)
			}
		}
	}
	return rec.States(), nil
}

// OperatorLog returns the operator's log written since the run started
// (all of it if it restarted and the offset no longer fits), and whether
// there is a log to read.
func (c *Context) OperatorLog(ctx context.Context) (string, bool, error) {
	return c.run.operatorLog(ctx)
}

// Created lists the names of objects of a kind that the run applied.
func (c *Context) Created(kind string) []string {
	gvk, err := c.run.lab.ResolveKind(kind)
	if err != nil {
		return nil
	}
	c.run.mu.Lock()
	defer c.run.mu.Unlock()
	var out []string
	for _, k := range c.run.created {
		if k.GVK.GroupKind() == gvk.GroupKind() {
			out = append(out, k.Name)
		}
	}
	return out
}

func (r *run) operatorLog(ctx context.Context) (string, bool, error) {
	op := r.o.Operator
	if op == nil || op.Logs == nil {
		return "", false, nil
	}
	b, err := op.Logs(ctx)
	if err != nil {
		return "", true, err
	}
	if r.logOffset <= len(b) {
		b = b[r.logOffset:]
	}
	return string(b), true, nil
}
