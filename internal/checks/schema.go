package checks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name: "crd",
		Doc:  "a CustomResourceDefinition is installed and established, with the scope, version and status subresource asked for",
	}, runCRD))
	Register(Typed(Definition{
		Name: "crd-schema",
		Doc:  "the installed CRD's schema has the fields (types, required, minimum, default, enum) and printer columns asked for",
	}, runCRDSchema))
	Register(Typed(Definition{
		Name:       "dry-run",
		Doc:        "a server-side dry-run create is rejected (validation) or accepted with defaults applied",
		Namespaced: true,
	}, runDryRun))
	Register(Typed(Definition{
		Name: "crd-matches-types",
		Doc:  "the installed CRD has every field the project's Go types declare (make manifests and make install were run after the last change)",
	}, runCRDMatchesTypes))
}

type crdParams struct {
	Name              string `json:"name"`
	Scope             string `json:"scope"`
	Version           string `json:"version"`
	StatusSubresource bool   `json:"statusSubresource"`
}

func (p *crdParams) Validate() error {
	if p.Name == "" || p.Version == "" {
		return errors.New("needs name and version")
	}
	if p.Scope != "Namespaced" && p.Scope != "Cluster" {
		return errors.New("scope is Namespaced or Cluster")
	}
	return nil
}

func getCRD(ctx context.Context, c *Context, name string) (*apiextensionsv1.CustomResourceDefinition, *unstructured.Unstructured, Outcome, bool) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := c.Client().Get(ctx, types.NamespacedName{Name: name}, crd)
	if apierrors.IsNotFound(err) {
		out := fail("CRD %s is not installed", name)
		out.Expected = "CRD " + name + " installed (make install)"
		out.Observed = "not found"
		return nil, nil, out, false
	}
	if err != nil {
		return nil, nil, errorf("reading CRD %s: %v", name, oneLine(err)), false
	}
	raw, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	u := &unstructured.Unstructured{Object: raw}
	u.SetManagedFields(nil)
	// The schema makes the object long; evidence shows the rest.
	return crd, u, Outcome{}, true
}

func crdVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

func runCRD(ctx context.Context, c *Context, p *crdParams) Outcome {
	crd, _, out, ok := getCRD(ctx, c, p.Name)
	if !ok {
		return out
	}
	var problems []string
	established := false
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		problems = append(problems, "not Established")
	}
	if string(crd.Spec.Scope) != p.Scope {
		problems = append(problems, fmt.Sprintf("scope %s, not %s", crd.Spec.Scope, p.Scope))
	}
	v := crdVersion(crd, p.Version)
	switch {
	case v == nil:
		var names []string
		for _, x := range crd.Spec.Versions {
			names = append(names, x.Name)
		}
		problems = append(problems, fmt.Sprintf("no version %s (has %s)", p.Version, strings.Join(names, ", ")))
	case !v.Served:
		problems = append(problems, fmt.Sprintf("version %s is not served", p.Version))
	case p.StatusSubresource && (v.Subresources == nil || v.Subresources.Status == nil):
		problems = append(problems, "no status subresource (+kubebuilder:subresource:status)")
	}
	want := fmt.Sprintf("%s established, %s, version %s", p.Name, p.Scope, p.Version)
	if p.StatusSubresource {
		want += " with the status subresource"
	}
	if len(problems) == 0 {
		return pass("CRD %s is installed: %s", p.Name, strings.TrimPrefix(want, p.Name+" "))
	}
	return Outcome{Status: report.Fail, Message: fmt.Sprintf("CRD %s: %s", p.Name, strings.Join(problems, "; ")),
		Expected: want, Observed: strings.Join(problems, "; ")}
}

type fieldSpec struct {
	// Path is dotted from the object's root: spec.retention.
	Path     string   `json:"path"`
	Type     string   `json:"type,omitempty"`
	Format   string   `json:"format,omitempty"`
	Required bool     `json:"required,omitempty"`
	Optional bool     `json:"optional,omitempty"`
	Minimum  *float64 `json:"minimum,omitempty"`
	Maximum  *float64 `json:"maximum,omitempty"`
	// Pattern holds examples the field's pattern must accept and reject:
	// any regular expression that sorts them the same way is right.
	Pattern *patternSpec    `json:"pattern,omitempty"`
	Default json.RawMessage `json:"default,omitempty"`
	Enum    []string        `json:"enum,omitempty"`
	// EnumIncludes asks only that these values are in the enum: a field
	// that later labs extend (lab 4.4 adds phases to lab 3.2's enum).
	EnumIncludes []string `json:"enumIncludes,omitempty"`
}

type patternSpec struct {
	Accepts []string `json:"accepts"`
	Rejects []string `json:"rejects"`
	// Like is the lab text's own pattern: the field's must sort every
	// string of a space generated from both patterns the same way (see
	// patternDifference), so any equivalent expression passes (\d for
	// [0-9], groups written otherwise) and any other fails with the
	// shortest string they disagree on.
	Like string `json:"like,omitempty"`
}

func (p *patternSpec) String() string {
	return fmt.Sprintf("a pattern accepting %s and rejecting %s", strings.Join(p.Accepts, ", "), strings.Join(p.Rejects, ", "))
}

// judge says what is wrong with a schema's pattern ("" when nothing). The
// API server evaluates patterns as ECMA-262 regular expressions; the
// patterns a lab asks for are in the part RE2 shares with them.
func (p *patternSpec) judge(pattern string) string {
	if pattern == "" {
		return "no pattern"
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Sprintf("pattern `%s` does not compile: %v", pattern, err)
	}
	var wrong []string
	for _, v := range p.Accepts {
		if !re.MatchString(v) {
			wrong = append(wrong, fmt.Sprintf("rejects %q", v))
		}
	}
	for _, v := range p.Rejects {
		if re.MatchString(v) {
			wrong = append(wrong, fmt.Sprintf("accepts %q", v))
		}
	}
	if len(wrong) == 0 && p.Like != "" {
		seeds := append(slices.Clone(p.Accepts), p.Rejects...)
		if v, theirs, ok := patternDifference(re, regexp.MustCompile(p.Like), seeds, pattern, p.Like); ok {
			verdict := "rejects"
			if theirs {
				verdict = "accepts"
			}
			wrong = append(wrong, fmt.Sprintf("%s %q, unlike the lab's `%s`", verdict, v, p.Like))
		}
	}
	if len(wrong) > 0 {
		return fmt.Sprintf("pattern `%s` %s", pattern, strings.Join(wrong, ", "))
	}
	return ""
}

// patternDifference looks for a string that re and like sort
// differently, and says whether re accepts it. Regular-expression
// equivalence is decided here by exhaustion over a space that reaches
// every way the two differ in practice: first every string of up to four
// characters (the shortest difference first), then every string one or
// two edits (a character inserted, replaced or deleted) away from the
// lab's examples (seeds), over an alphabet of the characters both
// patterns name (literals, the ends of classes), those letters in the
// other case, digits, and characters neither names (x . - and a space).
// A missing anchor, a misplaced alternation, an extra or a missing unit,
// a bound on the length, all show.
func patternDifference(re, like *regexp.Regexp, seeds []string, patterns ...string) (string, bool, bool) {
	alphabet := patternAlphabet(patterns...)
	differ := func(v string) (bool, bool) {
		a, b := re.MatchString(v), like.MatchString(v)
		return a, a != b
	}
	var buf []rune
	var walk func(n int) (string, bool, bool)
	walk = func(n int) (string, bool, bool) {
		if len(buf) == n {
			v := string(buf)
			a, d := differ(v)
			return v, a, d
		}
		for _, r := range alphabet {
			buf = append(buf, r)
			v, a, found := walk(n)
			buf = buf[:len(buf)-1]
			if found {
				return v, a, true
			}
		}
		return "", false, false
	}
	for n := 0; n <= 4; n++ {
		if v, a, found := walk(n); found {
			return v, a, true
		}
	}
	edits := func(s string) []string {
		rs := []rune(s)
		var out []string
		for i := 0; i <= len(rs); i++ {
			if i < len(rs) {
				out = append(out, string(slices.Delete(slices.Clone(rs), i, i+1)))
			}
			for _, r := range alphabet {
				out = append(out, string(slices.Insert(slices.Clone(rs), i, r)))
				if i < len(rs) {
					c := slices.Clone(rs)
					c[i] = r
					out = append(out, string(c))
				}
			}
		}
		return out
	}
	for _, seed := range seeds {
		for _, once := range edits(seed) {
			if a, d := differ(once); d {
				return once, a, true
			}
		}
	}
	for _, seed := range seeds {
		for _, once := range edits(seed) {
			for _, twice := range edits(once) {
				if a, d := differ(twice); d {
					return twice, a, true
				}
			}
		}
	}
	return "", false, false
}

// patternAlphabet is the characters patterns name, the letters among
// them in the other case, three digits and four strangers, each once.
func patternAlphabet(patterns ...string) []rune {
	seen := map[rune]bool{}
	var out []rune
	add := func(rs ...rune) {
		for _, r := range rs {
			if !seen[r] && unicode.IsPrint(r) {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	add('0', '5', '9', 'x', '.', '-', ' ')
	var visit func(re *syntax.Regexp)
	visit = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			add(re.Rune...)
		case syntax.OpCharClass:
			for i := 0; i+1 < len(re.Rune); i += 2 {
				lo, hi := re.Rune[i], re.Rune[i+1]
				if hi-lo > 255 { // a negated class: its ends are not characters anyone types
					continue
				}
				add(lo, hi)
			}
		}
		for _, sub := range re.Sub {
			visit(sub)
		}
	}
	for _, p := range patterns {
		if re, err := syntax.Parse(p, syntax.Perl); err == nil {
			visit(re)
		}
	}
	for _, r := range slices.Clone(out) {
		add(unicode.SimpleFold(r))
	}
	if len(out) > 24 { // keep the space (24^4 strings) quick
		out = out[:24]
	}
	return out
}

// columnSpec is a printer column the lab asks for, judged by what kubectl
// shows: the header (kubectl prints it upper-cased, so "Phase" and "phase"
// are one column), the value (a JSON path, compared parsed: .status.phase
// and .status['phase'] read the same field) and the type (date columns
// show an age, the others the value).
type columnSpec struct {
	Name     string `json:"name"`
	JSONPath string `json:"jsonPath"`
	// Type, when set, is the column's type: string, integer, number,
	// boolean or date.
	Type string `json:"type,omitempty"`
}

// judgeColumn says what is wrong with the CRD's printer columns as to one
// the lab asks for ("" when nothing).
func judgeColumn(want columnSpec, have []apiextensionsv1.CustomResourceColumnDefinition) string {
	for _, col := range have {
		if !strings.EqualFold(col.Name, want.Name) {
			continue
		}
		var bad []string
		if want.JSONPath != "" && !sameJSONPath(col.JSONPath, want.JSONPath) {
			bad = append(bad, fmt.Sprintf("shows %s, not %s", col.JSONPath, want.JSONPath))
		}
		if want.Type != "" && col.Type != want.Type {
			bad = append(bad, fmt.Sprintf("has type %s, not %s", col.Type, want.Type))
		}
		if len(bad) == 0 {
			return ""
		}
		return "printer column " + col.Name + " " + strings.Join(bad, " and ")
	}
	return "no printer column " + want.Name
}

// sameJSONPath reports whether two printer-column paths select the same
// field, compared as parsed by the API server's JSON path parser.
func sameJSONPath(a, b string) bool {
	pa, errA := parsedJSONPath(a)
	pb, errB := parsedJSONPath(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return pa == pb
}

func parsedJSONPath(path string) (string, error) {
	if !strings.HasPrefix(path, "{") {
		path = "{" + path + "}"
	}
	p, err := jsonpath.Parse("column", path)
	if err != nil {
		return "", err
	}
	var parts []string
	var walk func(n jsonpath.Node)
	walk = func(n jsonpath.Node) {
		if l, ok := n.(*jsonpath.ListNode); ok {
			for _, m := range l.Nodes {
				walk(m)
			}
			return
		}
		parts = append(parts, n.String())
	}
	walk(p.Root)
	return strings.Join(parts, "\n"), nil
}

type crdSchemaParams struct {
	Name           string       `json:"name"`
	Version        string       `json:"version"`
	Fields         []fieldSpec  `json:"fields"`
	PrinterColumns []columnSpec `json:"printerColumns,omitempty"`
}

func (p *crdSchemaParams) Validate() error {
	if p.Name == "" || p.Version == "" || (len(p.Fields) == 0 && len(p.PrinterColumns) == 0) {
		return errors.New("needs name, version and fields or printerColumns")
	}
	for _, f := range p.Fields {
		if f.Path == "" || (f.Required && f.Optional) {
			return fmt.Errorf("field %q: needs a path, and not both required and optional", f.Path)
		}
		if f.Pattern != nil && f.Pattern.Like != "" {
			re, err := regexp.Compile(f.Pattern.Like)
			if err != nil {
				return fmt.Errorf("field %s: pattern like: %w", f.Path, err)
			}
			for _, v := range f.Pattern.Accepts {
				if !re.MatchString(v) {
					return fmt.Errorf("field %s: pattern like `%s` rejects its own example %q", f.Path, f.Pattern.Like, v)
				}
			}
			for _, v := range f.Pattern.Rejects {
				if re.MatchString(v) {
					return fmt.Errorf("field %s: pattern like `%s` accepts its own counter-example %q", f.Path, f.Pattern.Like, v)
				}
			}
		}
	}
	for _, col := range p.PrinterColumns {
		if col.Name == "" {
			return errors.New("a printer column needs a name")
		}
		if col.Type != "" && !slices.Contains([]string{"string", "integer", "number", "boolean", "date"}, col.Type) {
			return fmt.Errorf("printer column %s: type is string, integer, number, boolean or date", col.Name)
		}
	}
	return nil
}

// schemaAt walks a structural schema along a dotted path, returning the
// node and its parent.
func schemaAt(root *apiextensionsv1.JSONSchemaProps, path string) (node, parent *apiextensionsv1.JSONSchemaProps) {
	node = root
	for _, part := range strings.Split(path, ".") {
		if node == nil {
			return nil, nil
		}
		child, ok := node.Properties[part]
		if !ok {
			return nil, node
		}
		parent = node
		node = &child
	}
	return node, parent
}

func runCRDSchema(ctx context.Context, c *Context, p *crdSchemaParams) Outcome {
	crd, _, out, ok := getCRD(ctx, c, p.Name)
	if !ok {
		return out
	}
	v := crdVersion(crd, p.Version)
	if v == nil || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return fail("CRD %s has no schema for version %s", p.Name, p.Version)
	}
	root := v.Schema.OpenAPIV3Schema
	var problems, good []string
	for _, f := range p.Fields {
		node, parent := schemaAt(root, f.Path)
		if node == nil {
			problems = append(problems, f.Path+" is missing")
			continue
		}
		last := f.Path[strings.LastIndex(f.Path, ".")+1:]
		required := parent != nil && slices.Contains(parent.Required, last)
		var bad []string
		if f.Type != "" && node.Type != f.Type {
			bad = append(bad, fmt.Sprintf("type %q, not %q", node.Type, f.Type))
		}
		if f.Format != "" && node.Format != f.Format {
			bad = append(bad, fmt.Sprintf("format %q, not %q", node.Format, f.Format))
		}
		if f.Required && !required {
			bad = append(bad, "not required")
		}
		if f.Optional && required {
			bad = append(bad, "required, but should be optional")
		}
		if f.Minimum != nil && (node.Minimum == nil || *node.Minimum != *f.Minimum) {
			got := "none"
			if node.Minimum != nil {
				got = strconv.FormatFloat(*node.Minimum, 'g', -1, 64)
			}
			bad = append(bad, fmt.Sprintf("minimum %s, not %s", got, strconv.FormatFloat(*f.Minimum, 'g', -1, 64)))
		}
		if f.Maximum != nil && (node.Maximum == nil || *node.Maximum != *f.Maximum) {
			got := "none"
			if node.Maximum != nil {
				got = strconv.FormatFloat(*node.Maximum, 'g', -1, 64)
			}
			bad = append(bad, fmt.Sprintf("maximum %s, not %s", got, strconv.FormatFloat(*f.Maximum, 'g', -1, 64)))
		}
		if f.Pattern != nil {
			if problem := f.Pattern.judge(node.Pattern); problem != "" {
				bad = append(bad, problem)
			}
		}
		if len(f.Default) > 0 {
			var want any
			_ = json.Unmarshal(f.Default, &want)
			var got any
			if node.Default != nil {
				_ = json.Unmarshal(node.Default.Raw, &got)
			}
			if node.Default == nil || !jsonEqual(got, want) {
				bad = append(bad, fmt.Sprintf("default %s, not %s", showValue(got), string(f.Default)))
			}
		}
		var enum []string
		for _, e := range node.Enum {
			var s string
			if json.Unmarshal(e.Raw, &s) == nil {
				enum = append(enum, s)
			}
		}
		if missing := slices.DeleteFunc(slices.Clone(f.EnumIncludes), func(v string) bool { return slices.Contains(enum, v) }); len(missing) > 0 {
			bad = append(bad, fmt.Sprintf("enum [%s] lacks %s", strings.Join(enum, ", "), strings.Join(missing, ", ")))
		}
		if len(f.Enum) > 0 {
			got := enum
			a, b := slices.Clone(got), slices.Clone(f.Enum)
			sort.Strings(a)
			sort.Strings(b)
			if !reflect.DeepEqual(a, b) {
				bad = append(bad, fmt.Sprintf("enum [%s], not [%s]", strings.Join(got, ", "), strings.Join(f.Enum, ", ")))
			}
		}
		if len(bad) > 0 {
			problems = append(problems, f.Path+": "+strings.Join(bad, ", "))
		} else {
			good = append(good, f.Path)
		}
	}
	for _, col := range p.PrinterColumns {
		if problem := judgeColumn(col, v.AdditionalPrinterColumns); problem != "" {
			problems = append(problems, problem)
		}
	}
	if len(problems) == 0 {
		cols := make([]string, len(p.PrinterColumns))
		for i, col := range p.PrinterColumns {
			cols[i] = col.Name
		}
		msg := fmt.Sprintf("CRD %s has %s", p.Name, strings.Join(good, ", "))
		if len(cols) > 0 {
			msg += "; printer columns " + strings.Join(cols, ", ")
		}
		return pass("%s", msg)
	}
	var want []string
	for _, f := range p.Fields {
		want = append(want, describeField(f))
	}
	for _, col := range p.PrinterColumns {
		w := "column " + col.Name + " " + col.JSONPath
		if col.Type != "" {
			w += " (" + col.Type + ")"
		}
		want = append(want, w)
	}
	return Outcome{Status: report.Fail,
		Message:  fmt.Sprintf("CRD %s differs from what the lab asks: %s", p.Name, strings.Join(problems, "; ")),
		Expected: strings.Join(want, "; "), Observed: strings.Join(problems, "; ")}
}

func describeField(f fieldSpec) string {
	s := f.Path
	var attrs []string
	if f.Type != "" {
		attrs = append(attrs, f.Type)
	}
	if f.Required {
		attrs = append(attrs, "required")
	}
	if f.Optional {
		attrs = append(attrs, "optional")
	}
	if f.Minimum != nil {
		attrs = append(attrs, "minimum "+strconv.FormatFloat(*f.Minimum, 'g', -1, 64))
	}
	if f.Maximum != nil {
		attrs = append(attrs, "maximum "+strconv.FormatFloat(*f.Maximum, 'g', -1, 64))
	}
	if f.Pattern != nil {
		attrs = append(attrs, f.Pattern.String())
	}
	if len(f.Default) > 0 {
		attrs = append(attrs, "default "+string(f.Default))
	}
	if len(f.Enum) > 0 {
		attrs = append(attrs, "enum "+strings.Join(f.Enum, "/"))
	}
	if len(f.EnumIncludes) > 0 {
		attrs = append(attrs, "enum with "+strings.Join(f.EnumIncludes, "/"))
	}
	if len(attrs) > 0 {
		s += " (" + strings.Join(attrs, ", ") + ")"
	}
	return s
}

type dryRunParams struct {
	Object map[string]any `json:"object"`
	// Reject: the create must be refused (validation).
	Reject bool `json:"reject,omitempty"`
	// Defaults: assertions on the object the API server would store.
	Defaults []labs.Assertion `json:"defaults,omitempty"`
}

func (p *dryRunParams) Validate() error {
	u := unstructured.Unstructured{Object: p.Object}
	if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
		return errors.New("object needs apiVersion, kind and metadata.name")
	}
	return nil
}

func runDryRun(ctx context.Context, c *Context, p *dryRunParams) Outcome {
	obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(p.Object)}
	obj.SetNamespace(c.Namespace())
	gvk := obj.GroupVersionKind()
	m, err := c.Client().RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return errorf("the cluster does not serve %s (is its CRD installed?)", gvk.GroupKind())
	}
	spec, _ := json.Marshal(obj.Object["spec"])
	what := fmt.Sprintf("%s with spec %s", gvk.Kind, spec)
	got, err := c.Dynamic().Resource(m.Resource).Namespace(c.Namespace()).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager})
	if p.Reject {
		if err == nil {
			return Outcome{Status: report.Fail, Message: fmt.Sprintf("the API server accepted %s: the schema does not validate it", what),
				Expected: "rejected by validation", Observed: "accepted", Object: got}
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return pass("the API server rejects %s: %s", what, logline.Cut(oneLine(err), 240))
		}
		return errorf("dry-run create of %s: %v", what, oneLine(err))
	}
	if err != nil {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("the API server rejected %s: %s", what, logline.Cut(oneLine(err), 240)),
			Expected: "accepted", Observed: "rejected"}
	}
	if ok, obs := EvalAssertions(got, p.Defaults); !ok {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("dry-run create of %s: the stored object lacks the defaults", what),
			Expected: DescribeAssertions(p.Defaults), Observed: obs, Object: got}
	}
	if len(p.Defaults) > 0 {
		return pass("dry-run create of %s: accepted, with %s", what, DescribeAssertions(p.Defaults))
	}
	return pass("dry-run create of %s: accepted", what)
}

type crdTypesParams struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// File is the Go file (relative to the project) declaring the types.
	File string `json:"file"`
	// Types maps a top-level field (spec, status) to its Go struct type.
	Types map[string]string `json:"types"`
	// CRDFile, when set, is the generated CRD in the project (relative
	// path) to compare instead of the installed one: make manifests was
	// run after the last change of the types.
	CRDFile string `json:"crdFile,omitempty"`
}

func (p *crdTypesParams) Validate() error {
	if p.Name == "" || p.Version == "" || p.File == "" || len(p.Types) == 0 {
		return errors.New("needs name, version, file and types")
	}
	return nil
}

func runCRDMatchesTypes(ctx context.Context, c *Context, p *crdTypesParams) Outcome {
	if c.ProjectDir() == "" {
		return skip("no project directory to compare the CRD with (pass --project)")
	}
	what := "the installed CRD " + p.Name
	var crd *apiextensionsv1.CustomResourceDefinition
	if p.CRDFile != "" {
		what = p.CRDFile
		raw, err := os.ReadFile(filepath.Join(c.ProjectDir(), filepath.FromSlash(p.CRDFile)))
		if err != nil {
			return fail("%s is missing: run make manifests", p.CRDFile)
		}
		crd = &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil || crd.Kind != "CustomResourceDefinition" {
			return fail("%s is no CustomResourceDefinition: run make manifests", p.CRDFile)
		}
	} else {
		installed, _, out, ok := getCRD(ctx, c, p.Name)
		if !ok {
			return out
		}
		crd = installed
	}
	v := crdVersion(crd, p.Version)
	if v == nil || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return fail("%s has no schema for version %s", what, p.Version)
	}
	path := filepath.Join(c.ProjectDir(), filepath.FromSlash(p.File))
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return fail("cannot parse %s: %v", p.File, oneLine(err))
	}
	var missing, checked []string
	tops := make([]string, 0, len(p.Types))
	for top := range p.Types {
		tops = append(tops, top)
	}
	sort.Strings(tops)
	for _, top := range tops {
		typeName := p.Types[top]
		fields, ok := structJSONFields(f, typeName)
		if !ok {
			missing = append(missing, fmt.Sprintf("%s declares no struct %s", p.File, typeName))
			continue
		}
		for _, name := range fields {
			if node, _ := schemaAt(v.Schema.OpenAPIV3Schema, top+"."+name); node == nil {
				missing = append(missing, top+"."+name)
			} else {
				checked = append(checked, top+"."+name)
			}
		}
	}
	if len(missing) == 0 {
		return pass("%s has every field of %s (%d fields)", what, p.File, len(checked))
	}
	return Outcome{Status: report.Fail,
		Message:  fmt.Sprintf("%s is older than %s: it lacks %s", what, p.File, strings.Join(missing, ", ")),
		Expected: "every json field of the Go types in the CRD schema",
		Observed: "missing: " + strings.Join(missing, ", ")}
}

// structJSONFields lists the json names of a struct's fields (embedded and
// "-" fields skipped).
func structJSONFields(f *ast.File, typeName string) ([]string, bool) {
	var out []string
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typeName {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		found = true
		for _, field := range st.Fields.List {
			if len(field.Names) == 0 || field.Tag == nil {
				continue
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				continue
			}
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			out = append(out, name)
		}
		return false
	})
	return out, found
}
