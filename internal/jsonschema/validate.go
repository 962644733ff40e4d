package jsonschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	openapierrors "k8s.io/kube-openapi/pkg/validation/errors"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// Validator checks documents against a schema Generate wrote. It runs the
// API server's own OpenAPI v3 validator (the one that checks custom
// resources), which reads no $ref: Compile resolves them first.
type Validator struct {
	schema *spec.Schema
}

// Compile reads a schema written by Generate.
func Compile(schemaJSON []byte) (*Validator, error) {
	var top map[string]any
	if err := json.Unmarshal(schemaJSON, &top); err != nil {
		return nil, fmt.Errorf("reading the schema: %w", err)
	}
	defs, _ := top["definitions"].(map[string]any)
	delete(top, "definitions")
	delete(top, "$schema")
	resolved, err := inline(top, defs, nil)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(resolved)
	if err != nil {
		return nil, err
	}
	s := &spec.Schema{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("reading the schema: %w", err)
	}
	return &Validator{schema: s}, nil
}

// inline replaces each {"$ref": "#/definitions/X", ...} by X's schema with
// the reference's other keys (its description) on top.
func inline(node any, defs map[string]any, seen []string) (any, error) {
	switch n := node.(type) {
	case map[string]any:
		out := map[string]any{}
		if ref, ok := n["$ref"].(string); ok {
			name, ok := strings.CutPrefix(ref, "#/definitions/")
			if !ok || defs[name] == nil {
				return nil, fmt.Errorf("schema: unresolvable $ref %q", ref)
			}
			for _, s := range seen {
				if s == name {
					return nil, fmt.Errorf("schema: %s refers to itself, which cannot be inlined", name)
				}
			}
			def, err := inline(defs[name], defs, append(seen, name))
			if err != nil {
				return nil, err
			}
			for k, v := range def.(map[string]any) {
				out[k] = v
			}
		}
		for k, v := range n {
			if k == "$ref" {
				continue
			}
			r, err := inline(v, defs, seen)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			r, err := inline(v, defs, seen)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return node, nil
}

// Validate checks doc (as encoding/json decodes into an any) and returns
// one error per violation, each starting with its path
// (scenarios[2].steps[0].expect), sorted.
func (sv *Validator) Validate(doc any) []error {
	res := validate.NewSchemaValidator(sv.schema, nil, "", strfmt.Default).Validate(doc)
	if res == nil || res.IsValid() {
		return nil
	}
	// An anyOf that failed is reported twice: as itself, and by what each
	// of its forms found wrong. The latter says more.
	var msgs, composite []string
	for _, err := range res.Errors {
		var ce openapierrors.Error
		if errors.As(err, &ce) && ce.Code() == openapierrors.CompositeErrorCode {
			composite = append(composite, describeComposite(err.Error()))
			continue
		}
		msgs = append(msgs, sv.describe(err))
	}
	if len(msgs) == 0 {
		msgs = composite
	}
	sort.Strings(msgs)
	msgs = compact(msgs)
	out := make([]error, len(msgs))
	for i, m := range msgs {
		out[i] = errors.New(m)
	}
	return out
}

func compact(s []string) []string {
	var out []string
	for i, m := range s {
		if i == 0 || m != s[i-1] {
			out = append(out, m)
		}
	}
	return out
}

// describe says what is wrong where, in the terms of the document (field
// names and list indices), without the validator's HTTP vocabulary.
func (sv *Validator) describe(err error) string {
	var v *openapierrors.Validation
	if !errors.As(err, &v) {
		return err.Error()
	}
	at := displayPath(v.Name)
	prefix := ""
	if at != "" {
		prefix = at + ": "
	}
	switch v.Code() {
	case openapierrors.UnallowedPropertyCode:
		return fmt.Sprintf("%sunknown field %q", prefix, v.Value)
	case openapierrors.RequiredFailCode:
		return prefix + "required field missing"
	case openapierrors.PatternFailCode:
		_, pattern, _ := strings.Cut(v.Error(), " should match '")
		pattern = strings.TrimSuffix(pattern, "'")
		msg := fmt.Sprintf("%s%s does not match %s", prefix, showValue(v.Value), pattern)
		if d := sv.descriptionOf(v.Name, pattern); d != "" {
			msg += " (" + firstSentence(d) + ")"
		}
		return msg
	case openapierrors.EnumFailCode:
		valid := make([]string, len(v.Values))
		for i, x := range v.Values {
			valid[i] = fmt.Sprintf("%v", x)
		}
		return fmt.Sprintf("%s%s: want %s", prefix, showValue(v.Value), strings.Join(valid, " or "))
	}
	msg := v.Error()
	msg = strings.TrimPrefix(msg, v.Name)
	msg = strings.TrimPrefix(msg, " in "+v.In)
	if got, ok := v.Value.(string); ok && v.Code() == openapierrors.InvalidTypeCode {
		msg = strings.Replace(msg, ": "+strconv.Quote(got), ", not "+got, 1) // the type found
	}
	return prefix + strings.TrimSpace(msg)
}

// describeComposite rewrites `"defaults.for" must validate at least one
// schema (anyOf)`.
func describeComposite(msg string) string {
	q, err := strconv.QuotedPrefix(msg)
	if err != nil {
		return msg
	}
	path, _ := strconv.Unquote(q)
	rest := strings.TrimSpace(strings.TrimPrefix(msg, q))
	if strings.HasSuffix(rest, "(anyOf)") {
		rest = "has none of the forms it may take"
	}
	if path = displayPath(path); path != "" {
		return path + ": " + rest
	}
	return rest
}

// descriptionOf is the description of the schema at a validator path that
// has the given pattern: the path's own, or one of its anyOf forms'.
func (sv *Validator) descriptionOf(path, pattern string) string {
	s := sv.at(path)
	if s == nil {
		return ""
	}
	for _, form := range s.AnyOf {
		if form.Pattern == pattern && form.Description != "" {
			return form.Description
		}
	}
	return s.Description
}

// at returns the schema that applies at a validator path (nil when the
// path leaves the schema).
func (sv *Validator) at(path string) *spec.Schema {
	s := sv.schema
	for _, part := range pathParts(path) {
		if s == nil {
			break
		}
		if _, err := strconv.Atoi(part); err == nil && s.Items != nil && s.Items.Schema != nil {
			s = s.Items.Schema
			continue
		}
		if p, ok := s.Properties[part]; ok {
			s = &p
			continue
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			s = s.AdditionalProperties.Schema
			continue
		}
		s = nil
	}
	return s
}

// firstSentence is the first sentence of a description.
func firstSentence(d string) string {
	d, _, _ = strings.Cut(d, "\n")
	if i := strings.Index(d, ". "); i >= 0 {
		return d[:i+1]
	}
	return d
}

func showValue(x any) string {
	if s, ok := x.(string); ok {
		return strconv.Quote(s)
	}
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	return string(b)
}

// displayPath is the validator's path without its leading dot:
// scenarios[0].steps[1].
func displayPath(p string) string { return strings.TrimPrefix(p, ".") }

// pathParts splits scenarios[0].steps[1] into scenarios, 0, steps, 1.
func pathParts(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '.' || r == '[' || r == ']' })
}
