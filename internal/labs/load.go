package labs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/labctl/labctl/internal/userr"
)

// BuiltinKinds are the short kind names every lab may use in refs.
var BuiltinKinds = map[string]string{
	"statefulset":              "apps/v1/StatefulSet",
	"deployment":               "apps/v1/Deployment",
	"service":                  "v1/Service",
	"secret":                   "v1/Secret",
	"configmap":                "v1/ConfigMap",
	"pod":                      "v1/Pod",
	"persistentvolumeclaim":    "v1/PersistentVolumeClaim",
	"pvc":                      "v1/PersistentVolumeClaim",
	"job":                      "batch/v1/Job",
	"customresourcedefinition": "apiextensions.k8s.io/v1/CustomResourceDefinition",
	"crd":                      "apiextensions.k8s.io/v1/CustomResourceDefinition",
}

// Parse decodes one lab definition: its apiVersion and kind, then the lab
// format's schema (unknown fields are errors), then Validate.
func Parse(name string, data []byte) (*Lab, error) {
	lab, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := lab.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return lab, nil
}

// Load reads every *.yaml in fsys (the embedded labs/ directory), sorted by
// lab ID.
func Load(fsys fs.FS) ([]*Lab, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*Lab
	seen := map[string]string{}
	for _, n := range names {
		raw, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		lab, err := Parse(n, raw)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[lab.ID]; dup {
			return nil, fmt.Errorf("%s: lab %s is already defined in %s", n, lab.ID, prev)
		}
		if want := lab.ID + ".yaml"; path.Base(n) != want {
			return nil, fmt.Errorf("%s: lab %s must be in a file named %s", n, lab.ID, want)
		}
		seen[lab.ID] = n
		out = append(out, lab)
	}
	sort.Slice(out, func(i, j int) bool { return lessID(out[i].ID, out[j].ID) })
	return out, nil
}

// Find returns the lab named id; "3.4" finds "lab-3.4".
func Find(all []*Lab, id string) (*Lab, bool) {
	id = strings.ToLower(strings.TrimSpace(id))
	if !strings.HasPrefix(id, "lab-") {
		id = "lab-" + id
	}
	for _, l := range all {
		if l.ID == id {
			return l, true
		}
	}
	return nil, false
}

// FindLab resolves a lab argument ("lab-8.2" or "8.2") as every command
// does: a usage error that lists the labs when there is no such lab.
func FindLab(all []*Lab, id string) (*Lab, error) {
	lab, ok := Find(all, id)
	if !ok {
		return nil, userr.Usage(fmt.Sprintf("there is no lab %q", id), "labs: "+strings.Join(IDs(all), ", ")+" (`labctl labs` lists them)")
	}
	return lab, nil
}

// IDs lists the labs' IDs.
func IDs(all []*Lab) []string {
	ids := make([]string, len(all))
	for i, l := range all {
		ids[i] = l.ID
	}
	return ids
}

// lessID orders lab-3.4 before lab-8.2 and lab-10.1 after lab-9.1.
func lessID(a, b string) bool {
	na, nb := idNumbers(a), idNumbers(b)
	for i := 0; i < len(na) && i < len(nb); i++ {
		if na[i] != nb[i] {
			return na[i] < nb[i]
		}
	}
	if len(na) != len(nb) {
		return len(na) < len(nb)
	}
	return a < b
}

func idNumbers(id string) []int {
	var out []int
	for _, p := range strings.FieldsFunc(id, func(r rune) bool { return r < '0' || r > '9' }) {
		n, _ := strconv.Atoi(p)
		out = append(out, n)
	}
	return out
}

// Task returns the task with the given ID.
func (l *Lab) Task(id string) (*Task, bool) {
	for i := range l.Tasks {
		if l.Tasks[i].ID == id {
			return &l.Tasks[i], true
		}
	}
	return nil, false
}

// MaxPoints is the sum of the tasks' points.
func (l *Lab) MaxPoints() int {
	n := 0
	for _, t := range l.Tasks {
		n += t.Points
	}
	return n
}

// ResolveKind turns a ref kind (database, statefulset) into a
// GroupVersionKind.
func (l *Lab) ResolveKind(kind string) (schema.GroupVersionKind, error) {
	spec, ok := l.Kinds[kind]
	if !ok {
		spec, ok = BuiltinKinds[kind]
	}
	if !ok {
		return schema.GroupVersionKind{}, fmt.Errorf("unknown kind %q: add it to the lab's kinds", kind)
	}
	return ParseGVK(spec)
}

// ParseGVK reads group/version/Kind, or version/Kind for the core group.
func ParseGVK(spec string) (schema.GroupVersionKind, error) {
	parts := strings.Split(spec, "/")
	switch len(parts) {
	case 2:
		return schema.GroupVersionKind{Version: parts[0], Kind: parts[1]}, nil
	case 3:
		return schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}, nil
	}
	return schema.GroupVersionKind{}, fmt.Errorf("kind %q: want group/version/Kind", spec)
}

// Validate checks what the lab format's schema cannot say, one field given
// another: one operation per step, refs to known kinds, unique IDs, every
// task backed by at least one assertion and every assertion tied to
// existing tasks. Parse checks the schema first (field names, types, ID
// patterns, enums, both languages of a text); check names and their
// parameters are validated by the checks package, which knows them.
func (l *Lab) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, k := range l.Reset.Order {
		if _, ok := l.Kinds[k]; !ok {
			add("reset.order: %q is not one of the lab's kinds", k)
		}
	}
	for i, lo := range l.Reset.Leftovers {
		if _, err := l.ResolveKind(lo.Kind); err != nil {
			add("reset.leftovers[%d]: %v", i, err)
		}
		if len(lo.Selects) == 0 && len(lo.Labels) == 0 && lo.NameSuffix == "" && len(lo.DataKeys) == 0 {
			add("reset.leftovers[%d]: matches every %s: give selects, labels, nameSuffix or dataKeys", i, lo.Kind)
		}
	}
	if l.Defaults.Timeout.Local <= 0 || l.Defaults.Timeout.Kind <= 0 {
		add("defaults.timeout needs local and kind durations")
	}
	if l.Defaults.For.Local <= 0 || l.Defaults.For.Kind <= 0 {
		add("defaults.for needs local and kind durations")
	}
	if p := l.Defaults.Progress; p != nil {
		l.validateProgressSpec(p, "defaults", add)
	}
	tasks := map[string]bool{}
	for _, t := range l.Tasks {
		if tasks[t.ID] {
			add("task %s is defined twice", t.ID)
		}
		tasks[t.ID] = true
	}
	covered := map[string]bool{}
	checkIDs := map[string]string{}
	scenarios := map[string]bool{}
	for _, sc := range l.Scenarios {
		where := fmt.Sprintf("scenario %q", sc.Name)
		if scenarios[sc.Name] {
			add("%s is defined twice", where)
		}
		scenarios[sc.Name] = true
		for _, r := range sc.Record {
			if _, err := l.ResolveKind(r.Kind); err != nil {
				add("%s: record %s: %v", where, r, err)
			}
		}
		marks := map[string]bool{}
		for i := range sc.Steps {
			st := &sc.Steps[i]
			at := fmt.Sprintf("%s step %d", where, i+1)
			if st.ID != "" {
				at = fmt.Sprintf("%s step %s", where, st.ID)
			}
			n := 0
			for _, set := range []bool{st.Apply != nil, st.Patch != nil, st.Delete != nil, st.Wait != nil, st.Expect != nil, st.Check != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				add("%s: needs exactly one of apply, patch, delete, wait, expect, check (has %d)", at, n)
				continue
			}
			if st.Meanwhile {
				var prev *Step
				if i > 0 {
					prev = &sc.Steps[i-1]
				}
				switch {
				case !st.IsAssertion():
					add("%s: meanwhile runs an assertion alongside the one before it: %s is an action", at, st.Kind())
				case prev == nil || !prev.IsAssertion():
					add("%s: meanwhile needs an assertion (expect or check) right before it", at)
				case prev.Gate:
					add("%s: meanwhile cannot run alongside a gate: what follows a gate waits for it", at)
				case st.Mark != "":
					add("%s: a meanwhile step starts with the one before it, so it cannot set a mark", at)
				}
			}
			if st.Mark != "" {
				if marks[st.Mark] {
					add("%s: mark %q is set twice", at, st.Mark)
				}
				marks[st.Mark] = true
			}
			if st.Why != nil && st.Severity != "warn" {
				add("%s: why explains a warning: it needs severity warn", at)
			}
			if st.IsAssertion() {
				if st.ID == "" {
					add("%s: an assertion needs an id", at)
				} else if prev, dup := checkIDs[st.ID]; dup {
					add("%s: id %s is already used in %s", at, st.ID, prev)
				} else {
					checkIDs[st.ID] = where
				}
				if len(st.Tasks) == 0 {
					add("%s: an assertion needs tasks", at)
				}
				for _, t := range st.Tasks {
					if !tasks[t] {
						add("%s: unknown task %s", at, t)
					}
					covered[t] = true
				}
				if st.Title.IsZero() {
					add("%s: an assertion needs a title (en and ru)", at)
				}
			} else {
				if len(st.Tasks) > 0 || st.Severity != "" || st.Gate {
					add("%s: %s is an action: tasks, severity and gate belong to expect and check steps", at, st.Kind())
				}
			}
			l.validateStep(st, at, add)
		}
	}
	for _, t := range l.Tasks {
		if !covered[t.ID] {
			add("task %s has no checks", t.ID)
		}
	}
	return errors.Join(errs...)
}

func (l *Lab) validateStep(st *Step, at string, add func(string, ...any)) {
	ref := func(r Ref) {
		if r.IsZero() {
			add("%s: needs a ref kind/name", at)
			return
		}
		if _, err := l.ResolveKind(r.Kind); err != nil {
			add("%s: %v", at, err)
		}
	}
	switch {
	case st.Apply != nil:
		obj := st.Apply.Object
		av, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		md, _ := obj["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		if av == "" || kind == "" || name == "" {
			add("%s: apply needs an object with apiVersion, kind and metadata.name", at)
		}
		if ns, ok := md["namespace"]; ok {
			add("%s: apply object sets metadata.namespace %v: objects go into the run's namespace", at, ns)
		}
	case st.Patch != nil:
		ref(st.Patch.Ref)
	case st.Delete != nil:
		switch {
		case !st.Delete.Ref.IsZero() && st.Delete.All != "":
			add("%s: delete takes ref or all, not both", at)
		case st.Delete.All != "":
			if _, err := l.ResolveKind(strings.ToLower(st.Delete.All)); err != nil {
				add("%s: %v", at, err)
			}
		default:
			ref(st.Delete.Ref)
		}
	case st.Wait != nil:
		ref(st.Wait.Ref)
		if (len(st.Wait.Eventually) == 0) == (st.Wait.Quiet == nil) || (st.Wait.Mode() != "eventually" && st.Wait.Mode() != "") {
			add("%s: wait takes eventually or quiet", at)
		}
		for _, a := range st.Wait.Eventually {
			if err := a.validate(); err != nil {
				add("%s: %v", at, err)
			}
		}
		l.validateProgress(st.Wait, at, add)
		if st.Wait.Stuck != nil {
			add("%s: stuck belongs to expect steps", at)
		}
	case st.Expect != nil:
		e := st.Expect
		ref(e.Ref)
		mode := e.Mode()
		if mode == "" || strings.Contains(mode, "+") {
			add("%s: expect needs exactly one of eventually, consistently, recreated, absent (has %q)", at, mode)
		}
		if e.For != nil && len(e.Consistently) == 0 {
			add("%s: for belongs to consistently", at)
		}
		if e.Quiet != nil {
			add("%s: quiet belongs to wait steps", at)
		}
		l.validateProgress(e, at, add)
		if e.OnTimeout != "" {
			add("%s: onTimeout belongs to wait steps", at)
		}
		if k := e.Stuck; k != nil {
			if len(e.Eventually) == 0 {
				add("%s: stuck belongs to eventually", at)
			}
			for _, a := range k.When {
				if err := a.validate(); err != nil {
					add("%s: stuck: %v", at, err)
				}
			}
		}
		for _, a := range append(slices.Clone(e.Eventually), e.Consistently...) {
			if err := a.validate(); err != nil {
				add("%s: %v", at, err)
			}
		}
	}
}

func (l *Lab) validateProgress(e *Expect, at string, add func(string, ...any)) {
	if e.Progress == nil {
		return
	}
	if len(e.Consistently) > 0 {
		add("%s: progress belongs to a wait, not to consistently", at)
	}
	l.validateProgressSpec(e.Progress, at, add)
}

func (l *Lab) validateProgressSpec(p *Progress, at string, add func(string, ...any)) {
	if p.Kind != "" {
		if _, err := l.ResolveKind(strings.ToLower(p.Kind)); err != nil {
			add("%s: progress: %v", at, err)
		}
	}
	if p.Idle.Local <= 0 || p.Idle.Kind <= 0 || p.Each.Local <= 0 || p.Each.Kind <= 0 {
		add("%s: progress needs idle and each for both profiles", at)
	}
}

func (a Assertion) validate() error {
	n := 0
	for _, set := range []bool{len(a.Equals) > 0, len(a.NotEquals) > 0, a.EqualsPath != "", a.In != nil, a.Exists != nil, a.Matches != "", len(a.Has) > 0, a.Condition != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("assertion %q: needs exactly one of equals, notEquals, equalsPath, in, exists, matches, has, condition", a.Path)
	}
	if len(a.Has) > 0 {
		var partial any
		if err := json.Unmarshal(a.Has, &partial); err != nil {
			return fmt.Errorf("assertion %q: has: %w", a.Path, err)
		}
		if a.Path == "" {
			if _, ok := partial.(map[string]any); !ok {
				return errors.New("has without a path needs a partial object (a map)")
			}
			return nil
		}
	}
	if a.Condition != nil {
		if a.Path != "" {
			return fmt.Errorf("condition %s: no path (it reads status.conditions)", a.Condition.Type)
		}
		return nil
	}
	if a.Path == "" {
		return errors.New("assertion needs a path")
	}
	if _, err := ParsePath(a.Path); err != nil {
		return err
	}
	if a.EqualsPath != "" {
		if _, err := ParsePath(a.EqualsPath); err != nil {
			return fmt.Errorf("assertion %s: equalsPath: %w", a.Path, err)
		}
	}
	if a.Matches != "" {
		if _, err := regexp.Compile(a.MatchesPattern("ns")); err != nil {
			return fmt.Errorf("assertion %s: %w", a.Path, err)
		}
	}
	return nil
}

// PathElem is one element of an assertion path: a field, or a list item
// picked by key=value.
type PathElem struct {
	Field    string
	Key, Val string // when Key != "": the list item whose Key equals Val
	// Index, when not nil, is the list item at that position ([0]).
	Index *int
}

// ParsePath splits status.conditions[type=Ready].reason and
// spec.volumeClaimTemplates[0].metadata.name.
func ParsePath(p string) ([]PathElem, error) {
	var out []PathElem
	for _, part := range strings.Split(p, ".") {
		field, sel, hasSel := strings.Cut(part, "[")
		if field == "" {
			return nil, fmt.Errorf("path %q: empty field", p)
		}
		out = append(out, PathElem{Field: field})
		if hasSel {
			sel, ok := strings.CutSuffix(sel, "]")
			if i, err := strconv.Atoi(sel); ok && err == nil && i >= 0 {
				out = append(out, PathElem{Index: &i})
				continue
			}
			k, v, ok2 := strings.Cut(sel, "=")
			if !ok || !ok2 || k == "" {
				return nil, fmt.Errorf("path %q: a selector is [key=value] or [index]", p)
			}
			out = append(out, PathElem{Key: k, Val: v})
		}
	}
	return out, nil
}
