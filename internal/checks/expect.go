package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/report"
)

// expect runs an expect step: a watch on one object.
func (s *scenario) expect(ctx context.Context, e *labs.Expect, timeout time.Duration) Outcome {
	r := s.r
	ref := e.Ref
	_, gvr, _, err := r.gvr(ref.Kind)
	if err != nil {
		return Outcome{Status: report.Error, Message: oneLine(err), Related: []string{ref.Name}}
	}
	related := []string{ref.Name}
	start := time.Now()
	since := func() string { return roundDur(time.Since(start)) }

	switch {
	case len(e.Eventually) > 0:
		want := DescribeAssertions(e.Eventually)
		var observed string
		last, err := r.waitFollowing(ctx, gvr, ref.Name, timeout, e.Progress, func(u *unstructured.Unstructured) (bool, error) {
			ok, obs := EvalAssertions(u, e.Eventually)
			observed = obs
			return ok, nil
		})
		if err == nil {
			return Outcome{Status: report.Pass, Message: fmt.Sprintf("%s: %s (after %s)", ref, want, since()), Object: last, Related: related}
		}
		if !isTimeout(err) || ctx.Err() != nil {
			return Outcome{Status: report.Error, Message: fmt.Sprintf("watching %s: %s", ref, oneLine(err)), Object: last, Related: related}
		}
		if last == nil {
			observed = ref.String() + " does not exist"
		}
		out := Outcome{Status: report.Fail, Message: fmt.Sprintf("%s: %s waiting for %s; last seen: %s", ref, oneLine(err), want, observed),
			Expected: want, Observed: observed, Object: last, Related: related}
		if e.Stuck != nil {
			s.excuseStuck(ctx, e, gvr, last, timeout, &out)
		}
		return out

	case len(e.Consistently) > 0:
		d := r.lab.Defaults.For.For(r.profile)
		if e.For != nil && !e.For.IsZero() {
			d = e.For.For(r.profile)
		}
		d = r.stretched(d)
		want := DescribeAssertions(e.Consistently)
		var violation string
		var at time.Duration
		last, err := r.waitFor(ctx, gvr, ref.Name, d, func(u *unstructured.Unstructured) (bool, error) {
			ok, obs := EvalAssertions(u, e.Consistently)
			if !ok {
				violation, at = obs, time.Since(start)
				if u == nil {
					violation = ref.String() + " does not exist"
				}
				return true, nil
			}
			return false, nil
		})
		switch {
		case err == nil:
			return Outcome{Status: report.Fail, Message: fmt.Sprintf("%s: expected %q for %s, but that changed after %s", ref, want, roundDur(d), roundDur(at)),
				Expected: want + " for " + roundDur(d), Observed: violation, Object: last, Related: related}
		case isTimeout(err) && ctx.Err() == nil:
			return Outcome{Status: report.Pass, Message: fmt.Sprintf("%s: %s held for %s", ref, want, roundDur(d)), Object: last, Related: related}
		default:
			return Outcome{Status: report.Error, Message: fmt.Sprintf("watching %s: %s", ref, oneLine(err)), Object: last, Related: related}
		}

	case e.Recreated:
		old, ok := s.deletedUID(ref)
		if !ok {
			return Outcome{Status: report.Error, Message: fmt.Sprintf("no step deleted %s before this one (lab definition error)", ref)}
		}
		last, err := r.waitFor(ctx, gvr, ref.Name, timeout, func(u *unstructured.Unstructured) (bool, error) {
			return u != nil && u.GetUID() != old && u.GetDeletionTimestamp() == nil, nil
		})
		if err == nil {
			return Outcome{Status: report.Pass, Message: fmt.Sprintf("%s re-created %s after the delete (new UID %s, was %s)", ref, since(), last.GetUID(), old),
				Object: last, Related: related}
		}
		if !isTimeout(err) || ctx.Err() != nil {
			return Outcome{Status: report.Error, Message: fmt.Sprintf("watching %s: %s", ref, oneLine(err)), Object: last, Related: related}
		}
		observed := ref.String() + " is still absent"
		if last != nil && last.GetUID() == old {
			observed = "the deleted object is still there (UID " + string(old) + "), being deleted"
		}
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("%s: timed out after %s waiting for it to be re-created; last seen: %s", ref, roundDur(timeout), observed),
			Expected: fmt.Sprintf("%s with a new UID within %s (an operator that watches it reacts that fast)", ref, roundDur(timeout)),
			Observed: observed, Object: last, Related: related}

	case e.Absent:
		last, err := r.waitFor(ctx, gvr, ref.Name, timeout, kube.Gone)
		if err == nil {
			return Outcome{Status: report.Pass, Message: fmt.Sprintf("%s is gone (after %s)", ref, since()), Related: related}
		}
		if !isTimeout(err) || ctx.Err() != nil {
			return Outcome{Status: report.Error, Message: fmt.Sprintf("watching %s: %s", ref, oneLine(err)), Object: last, Related: related}
		}
		if last != nil && last.GetDeletionTimestamp() == nil {
			if owner, ok := r.danglingController(ctx, last); ok {
				return Outcome{Status: report.Pass, Related: related,
					Message: fmt.Sprintf("%s is owned (controller reference) by %s, which is deleted: the garbage collector removes it", ref, owner),
					Notes:   []string{fmt.Sprintf("not yet deleted after %s: the cluster's garbage collector learns about a newly installed CRD within 30s", roundDur(timeout))}}
			}
		}
		observed := ref.String() + " still exists"
		if last != nil {
			if len(last.GetOwnerReferences()) == 0 {
				observed += " and has no owner reference (nothing garbage-collects it)"
			}
			if last.GetDeletionTimestamp() != nil {
				observed += fmt.Sprintf(", deletion pending on finalizers %v", last.GetFinalizers())
			}
		}
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("%s still exists after %s", ref, roundDur(timeout)),
			Expected: ref.String() + " deleted", Observed: observed, Object: last, Related: related}
	}
	return Outcome{Status: report.Error, Message: "expect step without a mode"}
}

// EvalAssertions checks every assertion against u (nil: the object does
// not exist, which only `exists: false` accepts). It returns whether all
// hold and, when not, what was observed for the first that does not.
func EvalAssertions(u *unstructured.Unstructured, as []labs.Assertion) (bool, string) {
	var obj map[string]any
	if u != nil {
		obj = u.Object
	}
	for _, a := range as {
		if ok, obs := evalAssertion(obj, a); !ok {
			return false, obs
		}
	}
	return true, ""
}

func evalAssertion(obj map[string]any, a labs.Assertion) (bool, string) {
	if c := a.Condition; c != nil {
		cond, found := findCondition(obj, c.Type)
		if !found {
			if obj == nil {
				return false, "the object does not exist"
			}
			return false, fmt.Sprintf("no %s condition (conditions: %s)", c.Type, summarizeConditions(obj))
		}
		status, _ := cond["status"].(string)
		reason, _ := cond["reason"].(string)
		msg, _ := cond["message"].(string)
		got := fmt.Sprintf("%s=%s reason %s", c.Type, status, reason)
		if msg != "" {
			got += fmt.Sprintf(" (%q)", logline.Cut(msg, 120))
		}
		if (c.Status != "" && status != c.Status) || (c.Reason != "" && reason != c.Reason) {
			return false, got
		}
		return true, got
	}
	if len(a.Has) > 0 {
		return evalHas(obj, a)
	}
	path, _ := labs.ParsePath(a.Path)
	v, found := lookup(obj, path)
	show := func() string {
		if !found {
			return a.Path + " is not set"
		}
		return fmt.Sprintf("%s = %s", a.Path, showValue(v))
	}
	switch {
	case a.Exists != nil:
		if found != *a.Exists {
			return false, show()
		}
		return true, show()
	case len(a.Equals) > 0:
		var want any
		_ = json.Unmarshal(a.Equals, &want)
		if !found || !jsonEqual(v, want) {
			return false, show()
		}
	case a.EqualsPath != "":
		other, _ := labs.ParsePath(a.EqualsPath)
		want, ok := lookup(obj, other)
		if !found || !ok || !jsonEqual(v, want) {
			if !ok {
				return false, show() + ", " + a.EqualsPath + " is not set"
			}
			return false, fmt.Sprintf("%s, %s = %s", show(), a.EqualsPath, showValue(want))
		}
	case len(a.NotEquals) > 0:
		var want any
		_ = json.Unmarshal(a.NotEquals, &want)
		if found && jsonEqual(v, want) {
			return false, show()
		}
	case a.In != nil:
		if !found {
			return false, show()
		}
		in := false
		for _, w := range a.In {
			if jsonEqual(v, w) {
				in = true
			}
		}
		if !in {
			return false, show()
		}
	case a.Matches != "":
		s, ok := v.(string)
		ns, _, _ := unstructured.NestedString(obj, "metadata", "namespace")
		if !found || !ok || !regexp.MustCompile(a.MatchesPattern(ns)).MatchString(s) {
			return false, show()
		}
	}
	return true, show()
}

// evalHas checks a partial object at a.Path (the whole object when empty)
// and says, when it does not hold, the first field that differs.
func evalHas(obj map[string]any, a labs.Assertion) (bool, string) {
	var want any
	_ = json.Unmarshal(a.Has, &want)
	var got any = obj
	found := obj != nil
	if a.Path != "" {
		path, _ := labs.ParsePath(a.Path)
		got, found = lookup(obj, path)
	}
	if !found {
		if obj == nil {
			return false, "the object does not exist"
		}
		return false, a.Path + " is not set"
	}
	if at, ok := hasPartial(got, want, a.Path); !ok {
		return false, at
	}
	return true, describeAssertion(a)
}

// hasPartial reports whether got holds every field of want (see
// labs.Assertion.Has); when not, it says what was observed where they part.
func hasPartial(got, want any, at string) (string, bool) {
	field := func(k string) string {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s = %s, not an object", at, showValue(got)), false
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, ok := g[k]
			if !ok {
				return field(k) + " is not set", false
			}
			if where, ok := hasPartial(v, w[k], field(k)); !ok {
				return where, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("%s = %s, not a list", at, showValue(got)), false
		}
		used := make([]bool, len(g))
		for i, item := range w {
			matched := false
			for j := range g {
				if _, ok := hasPartial(g[j], item, ""); ok && !used[j] {
					used[j], matched = true, true
					break
				}
			}
			if !matched {
				return fmt.Sprintf("%s has no item like %s (item %d wanted; it holds %s)", at, showValue(item), i, showValue(got)), false
			}
		}
		return "", true
	}
	if !jsonEqual(got, want) {
		return fmt.Sprintf("%s = %s", at, showValue(got)), false
	}
	return "", true
}

// DescribeAssertions says what the assertions expect, for people.
func DescribeAssertions(as []labs.Assertion) string {
	parts := make([]string, 0, len(as))
	for _, a := range as {
		parts = append(parts, describeAssertion(a))
	}
	return strings.Join(parts, ", ")
}

func describeAssertion(a labs.Assertion) string {
	if c := a.Condition; c != nil {
		s := "condition " + c.Type
		if c.Status != "" {
			s += "=" + c.Status
		}
		if c.Reason != "" {
			s += " reason " + c.Reason
		}
		return s
	}
	switch {
	case a.Exists != nil:
		if a.Path == "metadata" {
			if *a.Exists {
				return "exists"
			}
			return "does not exist"
		}
		if *a.Exists {
			return a.Path + " is set"
		}
		return a.Path + " is not set"
	case len(a.Equals) > 0:
		return a.Path + " = " + string(a.Equals)
	case len(a.Has) > 0:
		var want any
		_ = json.Unmarshal(a.Has, &want)
		if a.Path == "" {
			return "has " + showValue(want)
		}
		return a.Path + " has " + showValue(want)
	case len(a.NotEquals) > 0:
		return a.Path + " ≠ " + string(a.NotEquals)
	case a.EqualsPath != "":
		return a.Path + " = " + a.EqualsPath
	case a.In != nil:
		vals := make([]string, len(a.In))
		for i, v := range a.In {
			vals[i] = showValue(v)
		}
		return a.Path + " in [" + strings.Join(vals, ", ") + "]"
	case a.Matches != "":
		return a.Path + " matches /" + a.Matches + "/"
	}
	return a.Path
}

// lookup walks a parsed path through an object.
func lookup(obj map[string]any, path []labs.PathElem) (any, bool) {
	var cur any = obj
	if obj == nil {
		return nil, false
	}
	for _, el := range path {
		if el.Index != nil {
			list, ok := cur.([]any)
			if !ok || *el.Index >= len(list) {
				return nil, false
			}
			cur = list[*el.Index]
			continue
		}
		if el.Key != "" {
			list, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			var hit any
			for _, item := range list {
				m, ok := item.(map[string]any)
				if ok && fmt.Sprint(m[el.Key]) == el.Val {
					hit = m
					break
				}
			}
			if hit == nil {
				return nil, false
			}
			cur = hit
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok := m[el.Field]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

func findCondition(obj map[string]any, condType string) (map[string]any, bool) {
	conds, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == condType {
			return m, true
		}
	}
	return nil, false
}

func summarizeConditions(obj map[string]any) string {
	conds, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	if len(conds) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(conds))
	for _, c := range conds {
		m, _ := c.(map[string]any)
		parts = append(parts, fmt.Sprintf("%v=%v/%v", m["type"], m["status"], m["reason"]))
	}
	return strings.Join(parts, ", ")
}

// jsonEqual compares two values the way JSON sees them (int64 2 equals
// float64 2).
func jsonEqual(a, b any) bool {
	na, errA := normalize(a)
	nb, errB := normalize(b)
	if errA != nil || errB != nil {
		return false
	}
	return reflect.DeepEqual(na, nb)
}

func normalize(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(raw, &out)
	return out, err
}

func showValue(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", logline.Cut(x, 120))
	case nil:
		return "null"
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return logline.Cut(string(raw), 200)
}

func roundDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// danglingController reports whether u's controller owner no longer exists
// (by UID): then u is the garbage collector's to delete, and only the
// collector's own delay keeps it.
func (r *run) danglingController(ctx context.Context, u *unstructured.Unstructured) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(u)
	if ref == nil {
		return "", false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", false
	}
	m, err := r.client.RESTMapper().RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if err != nil {
		return "", false
	}
	res := r.dyn.Resource(m.Resource)
	var owner *unstructured.Unstructured
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		owner, err = res.Namespace(u.GetNamespace()).Get(ctx, ref.Name, metav1.GetOptions{})
	} else {
		owner, err = res.Get(ctx, ref.Name, metav1.GetOptions{})
	}
	name := strings.ToLower(ref.Kind) + "/" + ref.Name
	switch {
	case apierrors.IsNotFound(err):
		return name, true
	case err != nil:
		return "", false
	}
	return name, owner.GetUID() != ref.UID
}

// excuseStuck turns a timed-out wait into a warning when the object shows
// the signature of the course bug e.Stuck names: it is in e.Stuck.When and
// the operator's last write of its status was refused with 409 Conflict
// (the audit log says so; without one, nothing is excused).
func (s *scenario) excuseStuck(ctx context.Context, e *labs.Expect, gvr schema.GroupVersionResource, last *unstructured.Unstructured, timeout time.Duration, out *Outcome) {
	r := s.r
	if last == nil {
		return
	}
	if ok, _ := EvalAssertions(last, e.Stuck.When); !ok {
		return
	}
	c := &Context{run: r, scn: s, Timeout: timeout}
	if _, ok := c.auditPreconditions(); !ok {
		return
	}
	evs, err := c.syncAudit(ctx)
	if err != nil {
		return
	}
	id := c.Operator().Identity
	var lastWrite *AuditEvent
	for i := range evs {
		ev := &evs[i]
		if ev.On(gvr, r.ns, e.Ref.Name) && ev.By(id) && ev.subresource() == "status" && (ev.Verb == "update" || ev.Verb == "patch") {
			lastWrite = ev
		}
	}
	if lastWrite == nil || lastWrite.Code() != 409 {
		return
	}
	at := lastWrite.StageTimestamp
	stuckFor := time.Since(at)
	state := DescribeAssertions(e.Stuck.When)
	why := e.Stuck.Why.In(r.o.Lang)
	out.Status = report.Warn
	out.Message = fmt.Sprintf("%s stays %s: the operator's last write of its status (%s %s/status, %s ago) was refused with 409 Conflict and it never wrote again (course bug %s)",
		e.Ref, state, method(lastWrite.Verb), e.Ref, roundDur(stuckFor), e.Stuck.Bug)
	out.Notes = append(out.Notes, "reported as a warning: "+why,
		"whether this race strikes depends on timing, so the grade does not: the scenario's later failures are warnings too")
	out.Excuse = fmt.Sprintf("%s stayed %s (course bug %s, see the step before)", e.Ref, state, e.Stuck.Bug)
}
