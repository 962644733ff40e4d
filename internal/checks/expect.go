package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
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
		last, err := r.waitFollowing(ctx, gvr, ref.Name, timeout, e.Progress, 0, func(u *unstructured.Unstructured) (bool, error) {
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
		last, err := r.waitFollowing(ctx, gvr, ref.Name, timeout, e.Progress, recreateCeiling, func(u *unstructured.Unstructured) (bool, error) {
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
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("%s: %s waiting for it to be re-created; last seen: %s", ref, oneLine(err), observed),
			Expected: ref.String() + " with a new UID as soon as the operator's worker is free (an operator that watches it is woken by the delete)",
			Observed: observed, Object: last, Related: related}

	case e.Absent:
		last, err := r.waitFollowing(ctx, gvr, ref.Name, timeout, e.Progress, 0, kube.Gone)
		if err == nil {
			return Outcome{Status: report.Pass, Message: fmt.Sprintf("%s is gone (after %s)", ref, since()), Related: related}
		}
		if !isTimeout(err) || ctx.Err() != nil {
			return Outcome{Status: report.Error, Message: fmt.Sprintf("watching %s: %s", ref, oneLine(err)), Object: last, Related: related}
		}
		if last != nil && last.GetDeletionTimestamp() == nil {
			if owner, ok := r.danglingController(ctx, last); ok {
				waited := timeout
				if wt := (*waitTimeout)(nil); errors.As(err, &wt) {
					waited = wt.waited
				}
				return Outcome{Status: report.Pass, Related: related,
					Message: fmt.Sprintf("%s is owned (controller reference) by %s, which is deleted: the garbage collector removes it", ref, owner),
					Notes:   []string{fmt.Sprintf("not yet deleted after %s: the cluster's garbage collector learns about a newly installed CRD within 30s", roundDur(waited))}}
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
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("%s still exists: %s", ref, oneLine(err)),
			Expected: ref.String() + " deleted", Observed: observed, Object: last, Related: related}
	}
	return Outcome{Status: report.Error, Message: "expect step without a mode"}
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
