package checks

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/types"
	"slices"
	"strings"

	"github.com/labctl/labctl/internal/report"
)

type fieldIndexParams struct {
	// List is the list type task's helper lists (DatabaseList); at least
	// one MatchingFields query on it must exist.
	List string `json:"list"`
	// Field, when set, must be indexed and queried (lab 4.3: spec.image):
	// an IndexField on the list's object whose extractor reads the field,
	// under a key (any name) that a MatchingFields query on the list uses.
	Field string `json:"field,omitempty"`
}

func (p *fieldIndexParams) Validate() error {
	if p.List == "" {
		return errors.New("needs list")
	}
	return nil
}

// fieldKey is a MatchingFields key or an IndexField key: its string value
// when it has one however spelled (stringValue), else the expression.
type fieldKey struct {
	value    string
	resolved bool
	expr     string
	fn       *goFunc
	node     ast.Node
	// onList: a query in a function that names the lab's list type.
	onList bool
}

func (p *goProject) fieldKey(e ast.Expr, fn *goFunc, node ast.Node) fieldKey {
	v, ok := p.stringValue(e, fn)
	return fieldKey{value: v, resolved: ok, expr: types.ExprString(e), fn: fn, node: node}
}

// same reports whether two keys name one index: equal values, or, when
// neither resolves, the same expression.
func (k fieldKey) same(o fieldKey) bool {
	if k.resolved || o.resolved {
		return k.resolved && o.resolved && k.value == o.value
	}
	return k.expr == o.expr
}

func (k fieldKey) String() string {
	if k.resolved {
		return fmt.Sprintf("%q", k.value)
	}
	return k.expr
}

// fieldIndex is one IndexField(ctx, object, key, extractor) call.
type fieldIndex struct {
	key       fieldKey
	object    string // the indexed type's name, "" when not written as a literal
	extractor ast.Expr
}

// objectTypeName names the type of &T{}, T{} or new(T) ("" otherwise).
func objectTypeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.UnaryExpr:
		return objectTypeName(x.X)
	case *ast.CompositeLit:
		name := typeName(x.Type)
		return name[strings.LastIndex(name, ".")+1:]
	case *ast.CallExpr:
		if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "new" && len(x.Args) == 1 {
			name := typeName(x.Args[0])
			return name[strings.LastIndex(name, ".")+1:]
		}
	}
	return ""
}

// extractorReads reports whether an index's extractor reads the field
// (spec.image: .Spec and .Image, or their getters, in the extractor or the
// functions it calls), and whether the extractor's code was found at all.
func (p *goProject) extractorReads(ix fieldIndex, field string) (reads, known bool) {
	if ix.extractor == nil {
		return false, false
	}
	nodes := p.definitionsNamedIn(ix.extractor)
	if _, lit := ix.extractor.(*ast.FuncLit); lit {
		nodes = append(nodes, ix.extractor)
	}
	if len(nodes) == 0 {
		return false, false
	}
	for _, seg := range strings.Split(strings.TrimPrefix(field, "."), ".") {
		if !slices.ContainsFunc(nodes, func(n ast.Node) bool { return selects(n, seg) }) {
			return false, true
		}
	}
	return true, true
}

// selects reports whether the node selects a field named like the JSON
// name (x.Image or x.GetImage() for image).
func selects(n ast.Node, jsonName string) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			found = found || strings.EqualFold(sel.Sel.Name, jsonName) || strings.EqualFold(sel.Sel.Name, "Get"+jsonName)
		}
		return !found
	})
	return found
}

func runFieldIndex(_ context.Context, c *Context, p *fieldIndexParams) Outcome {
	proj, out, ok := c.project()
	if !ok {
		return out
	}
	var uses []fieldKey
	var indexes []fieldIndex
	for _, fn := range proj.funcs {
		if fn.decl.Body == nil {
			continue
		}
		f := fn.file
		onList := mentions(fn.decl, p.List)
		ast.Inspect(fn.decl.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				if _, ok := f.pkgSel(x.Type, pkgClient, "MatchingFields"); ok {
					for _, el := range x.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							u := proj.fieldKey(kv.Key, fn, kv)
							u.onList = onList
							uses = append(uses, u)
						}
					}
				}
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "IndexField" && len(x.Args) >= 3 {
					ix := fieldIndex{key: proj.fieldKey(x.Args[2], fn, x), object: objectTypeName(x.Args[1])}
					if len(x.Args) >= 4 {
						ix.extractor = x.Args[3]
					}
					indexes = append(indexes, ix)
				}
			}
			return true
		})
	}
	if !slices.ContainsFunc(uses, func(u fieldKey) bool { return u.onList }) {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("no List of %s with client.MatchingFields found (the field-selector helper, e.g. findDatabasesByOwner)", p.List),
			Expected: fmt.Sprintf("a function that lists %s with client.MatchingFields{key: value}, key indexed with IndexField", p.List)}
	}
	hasIndex := func(k fieldKey) bool {
		return slices.ContainsFunc(indexes, func(ix fieldIndex) bool { return ix.key.same(k) })
	}
	var missing, fine, others []string
	for _, u := range uses {
		if hasIndex(u) {
			fine = append(fine, u.String())
			continue
		}
		where := fmt.Sprintf("%s in %s (%s)", u, u.fn, proj.pos(u.node))
		if p.Field != "" && !(u.resolved && u.value == p.Field) {
			// With a field named, the task asks for that index only:
			// another key without one (lab 3.4's owner index) is that
			// lab's defect, charged there; here it is a note.
			others = append(others, where)
			continue
		}
		missing = append(missing, where)
	}
	var notes []string
	if len(others) > 0 {
		notes = append(notes, "not judged here (another lab's task): client.MatchingFields without an index: "+strings.Join(others, "; "))
	}
	if len(missing) > 0 {
		var have []string
		for _, ix := range indexes {
			have = append(have, ix.key.String())
		}
		observed := "no IndexField call at all"
		if len(have) > 0 {
			observed = "indexes registered: " + strings.Join(uniq(have), ", ")
		}
		return Outcome{Status: report.Fail,
			Message:  "client.MatchingFields queries a field that has no index, so the cached List fails at run time (\"index ... does not exist\"): " + strings.Join(missing, "; "),
			Expected: "mgr.GetFieldIndexer().IndexField(ctx, &Object{}, key, extractor) for every MatchingFields key",
			Observed: observed, Notes: notes}
	}
	if p.Field != "" {
		out := proj.judgeFieldIndex(p, indexes, uses)
		out.Notes = append(out.Notes, notes...)
		return out
	}
	return pass("every client.MatchingFields key has an index registered with IndexField: %s", strings.Join(uniq(fine), ", "))
}

// judgeFieldIndex asks for the index the lab means, by what it does, not
// by its key's spelling: an IndexField on the list's object whose
// extractor reads the field, under a key (any name) that a MatchingFields
// query on the list uses. An extractor labctl cannot find (a function
// value from elsewhere) is trusted when the key is the field's path.
func (proj *goProject) judgeFieldIndex(p *fieldIndexParams, indexes []fieldIndex, uses []fieldKey) Outcome {
	object := strings.TrimSuffix(p.List, "List")
	expected := fmt.Sprintf("mgr.GetFieldIndexer().IndexField(ctx, &%s{}, key, extractor) whose extractor returns %s, and a List of %s with client.MatchingFields{key: value}", object, p.Field, p.List)
	var reading, elsewhere []fieldIndex
	var wrongExtractor []string
	for _, ix := range indexes {
		reads, known := proj.extractorReads(ix, p.Field)
		named := ix.key.resolved && ix.key.value == p.Field
		if !(reads || !known && named) {
			if named {
				wrongExtractor = append(wrongExtractor, fmt.Sprintf("%s (%s)", ix.key, proj.pos(ix.key.node)))
			}
			continue
		}
		if ix.object != "" && ix.object != object {
			elsewhere = append(elsewhere, ix)
			continue
		}
		reading = append(reading, ix)
	}
	if len(reading) == 0 {
		o := Outcome{Status: report.Fail, Message: fmt.Sprintf("no index on %s of %s is registered", p.Field, object), Expected: expected, Observed: "no IndexField call whose extractor reads " + p.Field}
		switch {
		case len(elsewhere) > 0:
			ix := elsewhere[0]
			o.Message = fmt.Sprintf("the index %s (%s) reads %s of %s, not of %s: a List of %s cannot use it", ix.key, proj.pos(ix.key.node), p.Field, ix.object, object, p.List)
			o.Observed = "IndexField(ctx, &" + ix.object + "{}, ...)"
		case len(wrongExtractor) > 0:
			o.Message = fmt.Sprintf("the index %s never reads %s: its extractor returns another value, so a query by %s finds the wrong %ss", strings.Join(wrongExtractor, ", "), p.Field, p.Field, object)
			o.Observed = "an extractor without " + p.Field
		}
		return o
	}
	for _, ix := range reading {
		for _, u := range uses {
			if u.onList && ix.key.same(u) {
				return pass("%s is indexed (key %s, %s) and queried with client.MatchingFields in %s", p.Field, ix.key, proj.pos(ix.key.node), u.fn)
			}
		}
	}
	var keys []string
	for _, ix := range reading {
		keys = append(keys, ix.key.String())
	}
	return Outcome{Status: report.Fail,
		Message:  fmt.Sprintf("%s is indexed (key %s) but no List queries it: no client.MatchingFields on %s uses that key", p.Field, strings.Join(uniq(keys), ", "), p.List),
		Expected: expected, Observed: "no such query"}
}
