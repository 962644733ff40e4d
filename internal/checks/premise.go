package checks

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// A premise is a status labctl wrote itself (a status patch step) for the
// checks after it to stand on: lab 8.2 makes a Backup say Completed
// without BackupReady to judge the Database controller. The status is the
// operator's to write, though, and an operator may write over it (a
// Backup controller that derives a Backup's status from its Jobs does,
// rightly). A check that fails once the premise is gone did not measure
// what it is for, so it could not run: it costs nothing (a check that
// passed stays passed).
type premise struct {
	ref labs.Ref
	gvr schema.GroupVersionResource
	// fields are the patched leaves (a path such as "status.phase") and
	// their values as the API server stored them: what it pruned or
	// defaulted is what labctl set.
	fields map[string]any
}

// rememberPremise records the leaves a status patch set, as stored (the
// patch's response). A later patch of the same path replaces the earlier.
func (s *scenario) rememberPremise(ref labs.Ref, gvr schema.GroupVersionResource, merge map[string]any, stored *unstructured.Unstructured) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.premises[ref.String()]
	if p == nil {
		p = &premise{ref: ref, gvr: gvr, fields: map[string]any{}}
		s.premises[ref.String()] = p
	}
	for _, path := range leafPaths(nil, merge) {
		v, _, _ := unstructured.NestedFieldNoCopy(stored.Object, path...)
		p.fields[strings.Join(path, ".")] = v
	}
}

// forgetPremises drops the premises on objects labctl deletes: they are
// gone by design, not written over. An empty name drops every object of
// the resource.
func (s *scenario) forgetPremises(gvr schema.GroupVersionResource, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, p := range s.premises {
		if p.gvr == gvr && (name == "" || p.ref.Name == name) {
			delete(s.premises, key)
		}
	}
}

// leafPaths lists the paths a merge patch sets: nested objects are walked,
// anything else (a value, a list, null) is one leaf.
func leafPaths(prefix []string, patch map[string]any) [][]string {
	var out [][]string
	for k, v := range patch {
		path := append(append([]string(nil), prefix...), k)
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			out = append(out, leafPaths(path, m)...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// lostPremise says which status labctl set is no longer there ("" when
// every premise still holds, or when it cannot tell).
func (s *scenario) lostPremise(ctx context.Context) string {
	s.mu.Lock()
	premises := make([]*premise, 0, len(s.premises))
	for _, p := range s.premises {
		premises = append(premises, p)
	}
	s.mu.Unlock()
	r := s.r
	for _, p := range premises {
		obj, err := r.dyn.Resource(p.gvr).Namespace(r.ns).Get(ctx, p.ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("%s, whose status labctl set, no longer exists", p.ref)
		}
		if err != nil {
			continue
		}
		if changed := p.changed(obj); len(changed) > 0 {
			return fmt.Sprintf("the operator wrote over the status labctl set on %s (%s), which this check stands on",
				p.ref, strings.Join(changed, "; "))
		}
	}
	return ""
}

// changed describes the patched fields whose value is not what labctl set.
func (p *premise) changed(obj *unstructured.Unstructured) []string {
	var out []string
	for _, path := range slices.Sorted(maps.Keys(p.fields)) {
		now, _, _ := unstructured.NestedFieldNoCopy(obj.Object, strings.Split(path, ".")...)
		want := p.fields[path]
		if jsonEqual(now, want) {
			continue
		}
		if strings.HasSuffix(path, ".conditions") {
			out = append(out, fmt.Sprintf("%s %s, labctl set %s", path,
				summarizeConditions(map[string]any{"status": map[string]any{"conditions": now}}),
				summarizeConditions(map[string]any{"status": map[string]any{"conditions": want}})))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s, labctl set %s", path, showValue(now), showValue(want)))
	}
	return out
}

// judgePremises turns the group's failures into checks that could not run
// when a status labctl set is no longer there: a failure once that status
// is gone says nothing about what the check judges. What the check saw
// stays in its notes.
func (s *scenario) judgePremises(ctx context.Context, outs []Outcome) {
	for g := range outs {
		if outs[g].Status != report.Fail && outs[g].Status != report.Error {
			continue
		}
		lost := s.lostPremise(ctx)
		if lost == "" {
			return
		}
		outs[g].Notes = append(outs[g].Notes, "what it saw: "+outs[g].Message)
		outs[g].Status, outs[g].Message = report.Skipped, notRun+lost
	}
}
