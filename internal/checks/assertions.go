package checks

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/logline"
)

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
