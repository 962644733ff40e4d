package checks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/jsonpath"

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
