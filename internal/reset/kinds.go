package reset

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/labctl/labctl/internal/labs"
)

// LabKinds are the labs' own kinds (every lab's Kinds), in the order reset
// deletes them: those named in a lab's reset.order first, in that order,
// then the others by group and kind.
func LabKinds(all []*labs.Lab) ([]schema.GroupVersionKind, error) {
	var ordered, rest []schema.GroupVersionKind
	seen := map[schema.GroupKind]bool{}
	add := func(to *[]schema.GroupVersionKind, lab *labs.Lab, short string) error {
		gvk, err := lab.ResolveKind(short)
		if err != nil {
			return fmt.Errorf("%s: %w", lab.ID, err)
		}
		if !seen[gvk.GroupKind()] {
			seen[gvk.GroupKind()] = true
			*to = append(*to, gvk)
		}
		return nil
	}
	for _, lab := range all {
		for _, k := range lab.Reset.Order {
			if err := add(&ordered, lab, k); err != nil {
				return nil, err
			}
		}
	}
	for _, lab := range all {
		for _, k := range slices.Sorted(maps.Keys(lab.Kinds)) {
			if err := add(&rest, lab, k); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(rest, func(a, b schema.GroupVersionKind) int {
		return strings.Compare(a.Group+"/"+a.Kind, b.Group+"/"+b.Kind)
	})
	return append(ordered, rest...), nil
}

// leftover is a lab's Leftover with its kind resolved.
type leftover struct {
	gvk schema.GroupVersionKind
	labs.Leftover
}

func leftovers(all []*labs.Lab) ([]leftover, error) {
	var out []leftover
	for _, lab := range all {
		for _, lo := range lab.Reset.Leftovers {
			gvk, err := lab.ResolveKind(lo.Kind)
			if err != nil {
				return nil, fmt.Errorf("%s: reset.leftovers: %w", lab.ID, err)
			}
			out = append(out, leftover{gvk: gvk, Leftover: lo})
		}
	}
	return out, nil
}

// matches reports whether u, an object of the leftover's kind, is one.
func (lo leftover) matches(u *unstructured.Unstructured) bool {
	if lo.NameSuffix != "" && !strings.HasSuffix(u.GetName(), lo.NameSuffix) {
		return false
	}
	if !containsAll(u.GetLabels(), lo.Labels) {
		return false
	}
	if len(lo.Selects) > 0 {
		// A workload selects by spec.selector.matchLabels, a Service by
		// spec.selector.
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
		if sel == nil {
			sel, _, _ = unstructured.NestedStringMap(u.Object, "spec", "selector")
		}
		if !containsAll(sel, lo.Selects) {
			return false
		}
	}
	if len(lo.DataKeys) > 0 {
		data, _, _ := unstructured.NestedMap(u.Object, "data")
		for _, k := range lo.DataKeys {
			if _, ok := data[k]; !ok {
				return false
			}
		}
	}
	return true
}

// containsAll reports whether every key of want has its value in have.
func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
