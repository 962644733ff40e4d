package checks

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name:       "ordered",
		Doc:        "among recorded states, `then` reached its state only after `first` reached its own (etcd write order), and not earlier in time either",
		Namespaced: true,
	}, runOrdered))
	Register(Typed(Definition{
		Name:       "observed",
		Doc:        "a recorded object was, at some point, in the given state",
		Namespaced: true,
	}, runObserved))
	Register(Typed(Definition{
		Name:       "leftovers",
		Doc:        "nothing the operator made is left in the namespace (a StatefulSet's claims aside, which Kubernetes keeps by design)",
		Namespaced: true,
	}, runLeftovers))
	Register(Typed(Definition{
		Name:       "operator-made",
		Doc:        "the namespace holds objects of the given kinds that the run did not apply itself: the operator made something for a cleanup to remove",
		Namespaced: true,
	}, runOperatorMade))
}

type stateSpec struct {
	Ref  labs.Ref         `json:"ref"`
	When []labs.Assertion `json:"when"`
	// Time is a path to a timestamp in the object (RFC 3339), compared at
	// second precision; unset: the time labctl observed the state.
	Time string `json:"time,omitempty"`
	// Since names a step's mark: only states observed from then on count.
	Since string `json:"since,omitempty"`
}

type orderedParams struct {
	First stateSpec `json:"first"`
	Then  stateSpec `json:"then"`
	// ThenOptional passes when `then` never reached its state (it did not
	// come first, which is all this check asks then).
	ThenOptional bool `json:"thenOptional,omitempty"`
}

func (p *orderedParams) Validate() error {
	if p.First.Ref.IsZero() || p.Then.Ref.IsZero() || len(p.First.When) == 0 || len(p.Then.When) == 0 {
		return errors.New("needs first and then, each with ref and when")
	}
	return nil
}

// stateTime is when a recorded state says it happened.
func stateTime(o Observed, path string) (time.Time, bool) {
	if path == "" {
		return o.At.Truncate(time.Second), true
	}
	els, err := labs.ParsePath(path)
	if err != nil || o.Object == nil {
		return time.Time{}, false
	}
	v, ok := lookup(o.Object.Object, els)
	s, _ := v.(string)
	if !ok || s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

func runOrdered(ctx context.Context, c *Context, p *orderedParams) Outcome {
	first, err1 := c.HistorySince(ctx, p.First.Ref, p.First.Since)
	then, err2 := c.HistorySince(ctx, p.Then.Ref, p.Then.Since)
	if err := errors.Join(err1, err2); err != nil {
		return errorf("%v", err)
	}
	firstWant, thenWant := DescribeAssertions(p.First.When), DescribeAssertions(p.Then.When)
	firstAt := -1
	for i, o := range first {
		if ok, _ := EvalAssertions(o.Object, p.First.When); ok && o.Object != nil {
			firstAt = i
			break
		}
	}
	var thenStates []Observed
	for _, o := range then {
		if ok, _ := EvalAssertions(o.Object, p.Then.When); ok && o.Object != nil {
			thenStates = append(thenStates, o)
		}
	}
	out := Outcome{Related: []string{p.First.Ref.Name, p.Then.Ref.Name},
		Expected: fmt.Sprintf("%s (%s) only after %s (%s)", p.Then.Ref, thenWant, p.First.Ref, firstWant)}
	if len(thenStates) == 0 && p.ThenOptional {
		out.Status = report.Pass
		out.Message = fmt.Sprintf("%s never reached %s, so not before %s had %s", p.Then.Ref, thenWant, p.First.Ref, firstWant)
		return out
	}
	if len(thenStates) == 0 {
		out.Status = report.Fail
		out.Message = fmt.Sprintf("%s was never observed with %s, so the order cannot be shown", p.Then.Ref, thenWant)
		out.Observed = fmt.Sprintf("%d states of %s recorded, none with %s", len(then), p.Then.Ref, thenWant)
		if len(then) > 0 {
			out.Object = then[len(then)-1].Object
		}
		return out
	}
	early := thenStates[0]
	if firstAt < 0 {
		out.Status = report.Fail
		out.Message = fmt.Sprintf("%s reached %s although %s never had %s", p.Then.Ref, thenWant, p.First.Ref, firstWant)
		out.Observed = describeState(early)
		out.Object = early.Object
		return out
	}
	fs := first[firstAt]
	if early.RV() != 0 && fs.RV() != 0 && early.RV() < fs.RV() {
		out.Status = report.Fail
		out.Message = fmt.Sprintf("%s reached %s before %s had %s", p.Then.Ref, thenWant, p.First.Ref, firstWant)
		out.Observed = fmt.Sprintf("%s at resourceVersion %d, before %s at %d", describeState(early), early.RV(), p.First.Ref, fs.RV())
		out.Object = early.Object
		return out
	}
	ft, okF := stateTime(fs, p.First.Time)
	for _, st := range thenStates {
		tt, okT := stateTime(st, p.Then.Time)
		if okF && okT && tt.Before(ft) {
			out.Status = report.Fail
			out.Message = fmt.Sprintf("%s says %s, before %s had %s (%s)", p.Then.Ref, tt.Format(time.RFC3339), p.First.Ref, firstWant, ft.Format(time.RFC3339))
			out.Observed = describeState(st)
			out.Object = st.Object
			return out
		}
	}
	out.Status = report.Pass
	out.Message = fmt.Sprintf("%s reached %s only after %s had %s", p.Then.Ref, thenWant, p.First.Ref, firstWant)
	return out
}

func describeState(o Observed) string {
	if o.Object == nil {
		return "absent"
	}
	phase, _, _ := unstructured.NestedString(o.Object.Object, "status", "phase")
	s := fmt.Sprintf("%s %s", o.Object.GetKind(), o.Object.GetName())
	if phase != "" {
		s += " phase " + phase
	}
	if c := summarizeConditions(o.Object.Object); c != "none" {
		s += " (" + c + ")"
	}
	return s
}

type leftoversParams struct {
	// Kinds are the kinds to look at.
	Kinds []string `json:"kinds"`
	// KeepClaimsOf names a kind (database) whose objects' StatefulSet claims
	// (<template>-<name>-<ordinal>) may stay.
	KeepClaimsOf string `json:"keepClaimsOf,omitempty"`
	// Except lists names per kind that belong to the namespace itself
	// (configmap kube-root-ca.crt).
	Except map[string][]string `json:"except,omitempty"`
}

func (p *leftoversParams) Validate() error {
	if len(p.Kinds) == 0 {
		return errors.New("needs kinds")
	}
	return nil
}

func runLeftovers(ctx context.Context, c *Context, p *leftoversParams) Outcome {
	var claimRE *regexp.Regexp
	if p.KeepClaimsOf != "" {
		if names := c.Created(p.KeepClaimsOf); len(names) > 0 {
			quoted := make([]string, len(names))
			for i, n := range names {
				quoted[i] = regexp.QuoteMeta(n)
			}
			claimRE = regexp.MustCompile(`^[a-z0-9.-]+-(` + strings.Join(quoted, "|") + `)-[0-9]+$`)
		}
	}
	type leftover struct {
		kind string
		gvr  schema.GroupVersionResource
		obj  unstructured.Unstructured
	}
	list := func() ([]leftover, error) {
		var out []leftover
		for _, kind := range p.Kinds {
			gvr, err := c.Resolve(labs.Ref{Kind: kind, Name: "-"})
			if err != nil {
				return nil, err
			}
			items, err := c.Dynamic().Resource(gvr).Namespace(c.Namespace()).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for _, it := range items.Items {
				name := it.GetName()
				if slices.Contains(p.Except[kind], name) {
					continue
				}
				if gvr.Resource == "persistentvolumeclaims" && claimRE != nil && claimRE.MatchString(name) {
					continue
				}
				if gvr.Resource == "secrets" {
					if t, _, _ := unstructured.NestedString(it.Object, "type"); t == "kubernetes.io/service-account-token" {
						continue
					}
				}
				out = append(out, leftover{kind: kind, gvr: gvr, obj: it})
			}
		}
		return out, nil
	}
	deadline := time.Now().Add(c.Timeout)
	left, err := list()
	if err != nil {
		return errorf("listing the namespace: %v", oneLine(err))
	}
	// Garbage collection is asynchronous: wait (watching) for each one.
	for _, l := range left {
		_, _ = c.WaitFor(ctx, l.gvr, l.obj.GetName(), max(time.Until(deadline), time.Millisecond), kube.Gone)
	}
	left, err = list()
	if err != nil {
		return errorf("listing the namespace: %v", oneLine(err))
	}
	// What is still there but owned by a deleted controller is the garbage
	// collector's (which learns about a new CRD only within 30s).
	var pending []string
	kept := left[:0]
	for _, l := range left {
		if owner, ok := c.run.danglingController(ctx, &l.obj); ok && l.obj.GetDeletionTimestamp() == nil {
			pending = append(pending, fmt.Sprintf("%s/%s (owner %s)", l.kind, l.obj.GetName(), owner))
			continue
		}
		kept = append(kept, l)
	}
	left = kept
	// A claim deleted but held by kubernetes.io/pvc-protection until its
	// pod is gone is deleted as far as the operator is concerned.
	kept = left[:0]
	for _, l := range left {
		if l.gvr.Resource == "persistentvolumeclaims" && l.obj.GetDeletionTimestamp() != nil && onlyFinalizer(&l.obj, "kubernetes.io/pvc-protection") {
			pending = append(pending, fmt.Sprintf("%s/%s (deleted, its pvc-protection finalizer waits for its pod)", l.kind, l.obj.GetName()))
			continue
		}
		kept = append(kept, l)
	}
	left = kept
	if len(left) == 0 {
		out := pass("nothing is left in the namespace (%s)", strings.Join(p.Kinds, ", "))
		if len(pending) > 0 {
			out.Message = fmt.Sprintf("nothing is left in the namespace but what the garbage collector is about to delete: %s", strings.Join(pending, ", "))
		}
		return out
	}
	var names []string
	out := Outcome{Status: report.Fail}
	for _, l := range left {
		desc := l.kind + "/" + l.obj.GetName()
		if len(l.obj.GetOwnerReferences()) == 0 {
			desc += " (no owner reference)"
		} else if l.obj.GetDeletionTimestamp() != nil {
			desc += " (being deleted)"
		}
		names = append(names, desc)
		out.Related = append(out.Related, l.obj.GetName())
	}
	out.Object = &left[0].obj
	out.Message = fmt.Sprintf("%d object(s) left behind after the custom resources were deleted: %s", len(left), strings.Join(names, ", "))
	out.Expected = "everything the operator created is deleted with its owner (controller owner references, garbage collection)"
	out.Observed = strings.Join(names, ", ")
	return out
}

func onlyFinalizer(u *unstructured.Unstructured, name string) bool {
	f := u.GetFinalizers()
	return len(f) == 0 || (len(f) == 1 && f[0] == name)
}

// runOperatorMade guards a cleanup: checks that things are gone pass
// trivially for an operator that never made them, so the cleanup task
// needs evidence that there was something to clean up.
func runOperatorMade(ctx context.Context, c *Context, p *leftoversParams) Outcome {
	var made []string
	for _, kind := range p.Kinds {
		gvr, err := c.Resolve(labs.Ref{Kind: kind, Name: "-"})
		if err != nil {
			return errorf("%v", err)
		}
		items, err := c.Dynamic().Resource(gvr).Namespace(c.Namespace()).List(ctx, metav1.ListOptions{})
		if err != nil {
			return errorf("listing the namespace: %v", oneLine(err))
		}
		// What the run applied itself is not the operator's work; anything
		// else of these kinds is, owner reference or not (an operator that
		// forgets them still made something its finalizer may clean up).
		ours := c.Created(kind)
		for _, it := range items.Items {
			if slices.Contains(p.Except[kind], it.GetName()) || slices.Contains(ours, it.GetName()) {
				continue
			}
			what := kind + "/" + it.GetName()
			if ref := metav1.GetControllerOfNoCopy(&it); ref != nil {
				what += fmt.Sprintf(" (owner %s/%s)", strings.ToLower(ref.Kind), ref.Name)
			}
			made = append(made, what)
		}
	}
	if len(made) == 0 {
		return Outcome{Status: report.Fail,
			Message:  fmt.Sprintf("before the cleanup the namespace held nothing the operator made (%s), so there was nothing to clean up: the cleanup earns nothing until the operator creates its objects", strings.Join(p.Kinds, ", ")),
			Expected: "objects the operator created",
			Observed: "none"}
	}
	if len(made) > 5 {
		made = append(made[:5], fmt.Sprintf("and %d more", len(made)-5))
	}
	return pass("there is something to clean up: %s", strings.Join(made, ", "))
}

type observedParams struct {
	Ref  labs.Ref         `json:"ref"`
	When []labs.Assertion `json:"when"`
	// Since names a step's mark: only states observed from then on count.
	Since string `json:"since,omitempty"`
}

func (p *observedParams) Validate() error {
	if p.Ref.IsZero() || len(p.When) == 0 {
		return errors.New("needs ref and when")
	}
	return nil
}

func runObserved(ctx context.Context, c *Context, p *observedParams) Outcome {
	states, err := c.HistorySince(ctx, p.Ref, p.Since)
	if err != nil {
		return errorf("%v", err)
	}
	want := DescribeAssertions(p.When)
	var seen []string
	for _, o := range states {
		if o.Object == nil {
			continue
		}
		if ok, _ := EvalAssertions(o.Object, p.When); ok {
			return pass("%s was observed with %s", p.Ref, want)
		}
		if d := describeState(o); len(seen) == 0 || seen[len(seen)-1] != d {
			seen = append(seen, d)
		}
	}
	out := Outcome{Status: report.Fail, Related: []string{p.Ref.Name}, Expected: fmt.Sprintf("%s at some point with %s", p.Ref, want)}
	out.Message = fmt.Sprintf("%s was never observed with %s", p.Ref, want)
	out.Observed = "states seen: " + strings.Join(seen, " → ")
	if len(seen) == 0 {
		out.Observed = "no state of " + p.Ref.String() + " was seen"
	}
	if len(states) > 0 {
		out.Object = states[len(states)-1].Object
	}
	return out
}
