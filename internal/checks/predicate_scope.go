package checks

import (
	"go/ast"
	"maps"
	"strings"
)

// side is which object of an update an expression reads.
type side int

const (
	noSide side = iota
	oldSide
	newSide
)

// updateScope is what the analysis knows inside one function: which
// variables hold the old or the new object (or a field of it), which are
// the ok of a type assertion (taken to succeed: a StatefulSet watch sees
// StatefulSets), and which hold a boolean expression.
type updateScope struct {
	sides  map[string]side
	fields map[string]string
	oks    map[string]bool
	bools  map[string]ast.Expr
	depth  int
	proj   *goProject
}

func (p *goProject) newScope(depth int) *updateScope {
	return &updateScope{sides: map[string]side{}, fields: map[string]string{}, oks: map[string]bool{}, bools: map[string]ast.Expr{}, depth: depth, proj: p}
}

func (s *updateScope) clone() *updateScope {
	return &updateScope{sides: maps.Clone(s.sides), fields: maps.Clone(s.fields), oks: maps.Clone(s.oks), bools: maps.Clone(s.bools), depth: s.depth, proj: s.proj}
}

// sideOf says whether an expression reads the update's old or new object.
func (s *updateScope) sideOf(e ast.Expr) side {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		switch x.Sel.Name {
		case "ObjectOld":
			return oldSide
		case "ObjectNew":
			return newSide
		}
		return s.sideOf(x.X)
	case *ast.TypeAssertExpr:
		return s.sideOf(x.X)
	case *ast.CallExpr:
		if len(x.Args) == 0 {
			return s.sideOf(x.Fun)
		}
		if ret, inner := s.returned(x); ret != nil {
			return inner.sideOf(ret)
		}
	case *ast.ParenExpr:
		return s.sideOf(x.X)
	case *ast.StarExpr:
		return s.sideOf(x.X)
	case *ast.IndexExpr:
		return s.sideOf(x.X)
	case *ast.Ident:
		return s.sides[x.Name]
	}
	return noSide
}

// fieldOf names the field an expression reads last: Generation for
// x.Generation, x.GetGeneration() or a variable holding one.
func (s *updateScope) fieldOf(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		if x.Sel.Name == "ObjectOld" || x.Sel.Name == "ObjectNew" {
			return ""
		}
		return x.Sel.Name
	case *ast.CallExpr:
		if sel, ok := x.Fun.(*ast.SelectorExpr); ok && len(x.Args) == 0 {
			return strings.TrimPrefix(sel.Sel.Name, "Get")
		}
		if ret, inner := s.returned(x); ret != nil {
			return inner.fieldOf(ret)
		}
	case *ast.ParenExpr:
		return s.fieldOf(x.X)
	case *ast.StarExpr:
		return s.fieldOf(x.X)
	case *ast.Ident:
		return s.fields[x.Name]
	}
	return ""
}

// returned is what a call of a one-line project function returns
// (readyOf(e.ObjectOld) returning o.Status.ReadyReplicas), with the scope
// in which its parameters read what the arguments read.
func (s *updateScope) returned(call *ast.CallExpr) (ast.Expr, *updateScope) {
	if s.proj == nil || s.depth >= maxValueDepth {
		return nil, nil
	}
	id, ok := call.Fun.(*ast.Ident)
	if !ok {
		return nil, nil
	}
	for _, fn := range s.proj.funcs {
		if fn.name != id.Name || fn.recv != "" || fn.decl.Body == nil || len(fn.decl.Body.List) != 1 {
			continue
		}
		ret, ok := fn.decl.Body.List[0].(*ast.ReturnStmt)
		if !ok || len(ret.Results) != 1 {
			return nil, nil
		}
		return ret.Results[0], s.calleeScope(s.proj, fn, call.Args)
	}
	return nil, nil
}

func (s *updateScope) assign(lhs []ast.Expr, rhs []ast.Expr) {
	for i, l := range lhs {
		id, ok := l.(*ast.Ident)
		if !ok || id.Name == "_" {
			continue
		}
		delete(s.sides, id.Name)
		delete(s.bools, id.Name)
		if len(lhs) == len(rhs) {
			if sd := s.sideOf(rhs[i]); sd != noSide {
				s.sides[id.Name], s.fields[id.Name] = sd, s.fieldOf(rhs[i])
			} else {
				s.bools[id.Name] = rhs[i]
			}
			continue
		}
		// x, ok := e.ObjectOld.(*T)
		if len(rhs) == 1 && i == 1 {
			if _, isAssert := rhs[0].(*ast.TypeAssertExpr); isAssert {
				s.oks[id.Name] = true
			}
		} else if len(rhs) == 1 && i == 0 {
			if sd := s.sideOf(rhs[0]); sd != noSide {
				s.sides[id.Name], s.fields[id.Name] = sd, s.fieldOf(rhs[0])
			}
		}
	}
}

// calleeScope is the scope inside fn called with args: a parameter that
// receives the old or the new object (or a field of it) reads it there too.
func (s *updateScope) calleeScope(p *goProject, fn *goFunc, args []ast.Expr) *updateScope {
	inner := p.newScope(s.depth + 1)
	i := 0
	for _, field := range fn.decl.Type.Params.List {
		for _, name := range field.Names {
			if i < len(args) {
				if sd := s.sideOf(args[i]); sd != noSide {
					inner.sides[name.Name], inner.fields[name.Name] = sd, s.fieldOf(args[i])
				}
			}
			i++
		}
	}
	return inner
}
