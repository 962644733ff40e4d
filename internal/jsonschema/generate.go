// Package jsonschema writes the JSON Schema of a Go type from the type
// itself (json tags, field types) and from its source (doc comments become
// descriptions, kubebuilder-style markers become constraints), and validates
// documents against such a schema. labctl's lab format is its one user: the
// schema file is what editors read, and what the loader checks a lab with.
//
// Markers are comment lines of a field (or of a type) that start with "+":
//
//	+required, +optional                     (default: required unless the json tag says omitempty or omitzero)
//	+kubebuilder:validation:Enum=a;b         (string values)
//	+kubebuilder:validation:Pattern=`re`     (RE2 and ECMAScript alike: editors use the latter)
//	+kubebuilder:validation:Minimum=0
//	+kubebuilder:validation:MinLength=1, MinItems=1, MinProperties=1
//	+kubebuilder:validation:items:Pattern=`re` (and the others: for the items of a list or the values of a map)
//
// A type whose JSON form is not its Go structure (a custom UnmarshalJSON)
// describes itself with a JSONSchema method.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Draft is the JSON Schema dialect written: the one editors (VS Code's YAML
// extension) and the validator here both read.
const Draft = "http://json-schema.org/draft-07/schema#"

// Schemer is a type that gives its own schema, because its JSON form is not
// its Go structure (it has a custom UnmarshalJSON).
type Schemer interface {
	JSONSchema() map[string]any
}

// Options name the schema and say where the types' source is.
type Options struct {
	// Title is the schema's title.
	Title string
	// SrcDir is the directory of the Go package that defines the types:
	// their doc comments and markers are read from its non-test files.
	SrcDir string
}

// Generate returns the schema of root (a struct type), indented, with one
// definition per named struct type it reaches.
func Generate(root reflect.Type, opts Options) ([]byte, error) {
	docs, err := readDocs(opts.SrcDir)
	if err != nil {
		return nil, err
	}
	g := &generator{docs: docs, defs: map[string]any{}}
	ref, err := g.schema(root)
	if err != nil {
		return nil, err
	}
	top := map[string]any{"$schema": Draft, "definitions": g.defs}
	for k, v := range ref {
		top[k] = v
	}
	if opts.Title != "" {
		top["title"] = opts.Title
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(top); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type generator struct {
	docs map[string]typeDoc
	defs map[string]any
}

var (
	rawMessage = reflect.TypeFor[json.RawMessage]()
	schemer    = reflect.TypeFor[Schemer]()
)

// schema returns the schema of t: a $ref for a named struct (or Schemer),
// whose definition it adds.
func (g *generator) schema(t reflect.Type) (map[string]any, error) {
	if t == rawMessage {
		return map[string]any{}, nil // any JSON value
	}
	if t.Kind() == reflect.Pointer {
		return g.schema(t.Elem())
	}
	if t.Implements(schemer) || reflect.PointerTo(t).Implements(schemer) {
		return g.define(t, func() (map[string]any, error) {
			return reflect.New(t).Interface().(Schemer).JSONSchema(), nil
		})
	}
	switch t.Kind() {
	case reflect.Struct:
		return g.define(t, func() (map[string]any, error) { return g.object(t) })
	case reflect.Slice, reflect.Array:
		items, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: only maps with string keys have a JSON form", t)
		}
		if t.Elem().Kind() == reflect.Interface {
			return map[string]any{"type": "object"}, nil // free-form
		}
		values, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": values}, nil
	case reflect.Interface:
		return map[string]any{}, nil
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, nil
	}
	return nil, fmt.Errorf("%s: no JSON Schema for a %s", t, t.Kind())
}

// define adds t's definition (once) and returns a reference to it.
func (g *generator) define(t reflect.Type, build func() (map[string]any, error)) (map[string]any, error) {
	name := t.Name()
	if name == "" {
		return nil, fmt.Errorf("%s: an anonymous struct needs a name to be defined", t)
	}
	ref := map[string]any{"$ref": "#/definitions/" + name}
	if _, done := g.defs[name]; done {
		return ref, nil
	}
	g.defs[name] = nil // a recursive type refers to itself
	def, err := build()
	if err != nil {
		return nil, err
	}
	doc := g.docs[name]
	if _, set := def["description"]; !set && doc.text != "" {
		def["description"] = doc.text
	}
	if err := applyMarkers(def, doc.markers); err != nil {
		return nil, fmt.Errorf("type %s: %w", name, err)
	}
	g.defs[name] = def
	return ref, nil
}

// object is a struct's schema: its json fields, closed to others.
func (g *generator) object(t reflect.Type) (map[string]any, error) {
	props := map[string]any{}
	var required []string
	doc := g.docs[t.Name()]
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous {
			return nil, fmt.Errorf("%s.%s: embedded fields are not supported", t.Name(), f.Name)
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s, err := g.schema(f.Type)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		fd := doc.fields[f.Name]
		if fd.text != "" {
			s["description"] = fd.text
		}
		req := !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,")
		for _, m := range fd.markers {
			switch m {
			case "+required":
				req = true
			case "+optional":
				req = false
			}
		}
		if err := applyMarkers(s, fd.markers); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		if req {
			required = append(required, name)
		}
		props[name] = s
	}
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		sort.Strings(required)
		out["required"] = required
	}
	return out, nil
}

const markerPrefix = "+kubebuilder:validation:"

// applyMarkers sets the constraints that markers name on s.
func applyMarkers(s map[string]any, markers []string) error {
	for _, m := range markers {
		if m == "+required" || m == "+optional" {
			continue
		}
		rest, ok := strings.CutPrefix(m, markerPrefix)
		if !ok {
			return fmt.Errorf("unknown marker %q", m)
		}
		target := s
		if r, ok := strings.CutPrefix(rest, "items:"); ok {
			rest = r
			items, _ := s["items"].(map[string]any)
			if items == nil {
				items, _ = s["additionalProperties"].(map[string]any)
			}
			if items == nil {
				return fmt.Errorf("marker %q: not a list or map", m)
			}
			target = items
		}
		key, val, ok := strings.Cut(rest, "=")
		if !ok {
			return fmt.Errorf("marker %q: want Name=value", m)
		}
		switch key {
		case "Enum":
			target["enum"] = strings.Split(val, ";")
		case "Pattern":
			target["pattern"] = strings.Trim(val, "`")
		case "Minimum":
			n, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return fmt.Errorf("marker %q: %w", m, err)
			}
			target["minimum"] = n
		case "MinLength", "MinItems", "MinProperties":
			n, err := strconv.Atoi(val)
			if err != nil {
				return fmt.Errorf("marker %q: %w", m, err)
			}
			target[strings.ToLower(key[:1])+key[1:]] = n
		default:
			return fmt.Errorf("unknown marker %q", m)
		}
	}
	return nil
}

type typeDoc struct {
	text    string
	markers []string
	fields  map[string]fieldDoc
}

type fieldDoc struct {
	text    string
	markers []string
}

// readDocs reads the doc comments and markers of the types declared in
// dir's non-test Go files.
func readDocs(dir string) (map[string]typeDoc, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	docs := map[string]typeDoc{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("reading the types' doc comments: %w", err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				cg := ts.Doc
				if cg == nil && len(gd.Specs) == 1 {
					cg = gd.Doc
				}
				td := typeDoc{fields: map[string]fieldDoc{}}
				td.text, td.markers = splitComment(cg)
				if st, ok := ts.Type.(*ast.StructType); ok {
					for _, field := range st.Fields.List {
						cg := field.Doc
						if cg == nil {
							cg = field.Comment
						}
						var fd fieldDoc
						fd.text, fd.markers = splitComment(cg)
						for _, n := range field.Names {
							td.fields[n.Name] = fd
						}
					}
				}
				docs[ts.Name.Name] = td
			}
		}
	}
	return docs, nil
}

// splitComment separates a comment's markers from its text, and unwraps the
// text's lines (paragraphs stay apart).
func splitComment(cg *ast.CommentGroup) (string, []string) {
	if cg == nil {
		return "", nil
	}
	var markers, paras []string
	var para []string
	flush := func() {
		if len(para) > 0 {
			paras = append(paras, strings.Join(para, " "))
			para = nil
		}
	}
	for _, line := range strings.Split(cg.Text(), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "+"):
			markers = append(markers, line)
		case line == "":
			flush()
		default:
			para = append(para, line)
		}
	}
	flush()
	return strings.Join(paras, "\n\n"), markers
}
