package checks

import (
	"go/ast"
	"go/token"
	"strconv"
)

// maxValueDepth bounds how many names stringValue follows (a constant
// defined by a constant defined by ...), so a cycle in broken code ends.
const maxValueDepth = 16

// stringValue resolves an expression to the string it always holds, however
// the student spells it: a literal, a concatenation, a constant or a package
// variable never assigned again (by name, or as pkg.Name), a local variable
// of fn assigned once, a conversion (string(x), IndexKey(x)), or a call of a
// project function without parameters whose body returns one. Two spellings
// of one key are one key; a key that changes at run time is not resolved.
func (p *goProject) stringValue(e ast.Expr, fn *goFunc) (string, bool) {
	return p.stringValueDepth(e, fn, 0)
}

func (p *goProject) stringValueDepth(e ast.Expr, fn *goFunc, depth int) (string, bool) {
	if depth > maxValueDepth || e == nil {
		return "", false
	}
	depth++
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.ParenExpr:
		return p.stringValueDepth(x.X, fn, depth)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		a, ok := p.stringValueDepth(x.X, fn, depth)
		if !ok {
			return "", false
		}
		b, ok := p.stringValueDepth(x.Y, fn, depth)
		if !ok {
			return "", false
		}
		return a + b, true
	case *ast.Ident:
		if fn != nil {
			if v, found, ok := p.localValue(x.Name, fn, depth); found {
				return v, ok
			}
		}
		return p.packageValue(x.Name, depth)
	case *ast.SelectorExpr:
		// pkg.Name: a constant or variable of another package of the
		// project (names are looked up across packages, as consts are).
		if _, ok := x.X.(*ast.Ident); ok {
			return p.packageValue(x.Sel.Name, depth)
		}
	case *ast.CallExpr:
		switch f := x.Fun.(type) {
		case *ast.Ident:
			if len(x.Args) == 1 && !p.isFunc(f.Name) {
				return p.stringValueDepth(x.Args[0], fn, depth) // a conversion
			}
			if len(x.Args) == 0 {
				return p.callResult(f.Name, depth)
			}
		case *ast.SelectorExpr:
			if len(x.Args) == 0 {
				return p.callResult(f.Sel.Name, depth)
			}
		}
	}
	return "", false
}

// localValue resolves a variable of fn: found reports that fn declares or
// assigns the name at all (so a package-level one of that name is shadowed);
// ok, that it is assigned exactly once, to a value that resolves.
func (p *goProject) localValue(name string, fn *goFunc, depth int) (v string, found, ok bool) {
	if fn.decl.Body == nil {
		return "", false, false
	}
	var values []ast.Expr
	assigned := 0
	ast.Inspect(fn.decl.Body, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			for i, lhs := range s.Lhs {
				if id, isID := lhs.(*ast.Ident); isID && id.Name == name {
					assigned++
					if len(s.Lhs) == len(s.Rhs) && s.Tok != token.ADD_ASSIGN {
						values = append(values, s.Rhs[i])
					}
				}
			}
		case *ast.ValueSpec:
			for i, id := range s.Names {
				if id.Name == name {
					assigned++
					if i < len(s.Values) {
						values = append(values, s.Values[i])
					}
				}
			}
		case *ast.RangeStmt:
			for _, e := range []ast.Expr{s.Key, s.Value} {
				if id, isID := e.(*ast.Ident); isID && id.Name == name {
					assigned++
				}
			}
		}
		return true
	})
	if params := fn.decl.Type.Params; params != nil {
		for _, f := range params.List {
			for _, id := range f.Names {
				if id.Name == name {
					return "", true, false
				}
			}
		}
	}
	if assigned == 0 {
		return "", false, false
	}
	if assigned != 1 || len(values) != 1 {
		return "", true, false
	}
	v, ok = p.stringValueDepth(values[0], fn, depth)
	return v, true, ok
}

// packageValue resolves a package-level constant, or a package variable
// that no function assigns again.
func (p *goProject) packageValue(name string, depth int) (string, bool) {
	if c, ok := p.constExprs[name]; ok {
		return p.stringValueDepth(c.expr, nil, depth)
	}
	if v, ok := p.varExprs[name]; ok && !p.assignedInFuncs(name) {
		return p.stringValueDepth(v.expr, nil, depth)
	}
	return "", false
}

// assignedInFuncs reports whether some function assigns to name (or
// pkg.name, or x.name): a package variable that changes has no one value.
func (p *goProject) assignedInFuncs(name string) bool {
	for _, fn := range p.funcs {
		if fn.decl.Body == nil {
			continue
		}
		found := false
		ast.Inspect(fn.decl.Body, func(n ast.Node) bool {
			s, ok := n.(*ast.AssignStmt)
			if !ok || s.Tok == token.DEFINE {
				return !found
			}
			for _, lhs := range s.Lhs {
				switch l := lhs.(type) {
				case *ast.Ident:
					found = found || l.Name == name
				case *ast.SelectorExpr:
					found = found || l.Sel.Name == name
				}
			}
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

func (p *goProject) isFunc(name string) bool {
	for _, fn := range p.funcs {
		if fn.name == name {
			return true
		}
	}
	return false
}

// callResult resolves a call of the project's function or method named
// name that takes no parameters and only returns one value: keyFor() or
// r.indexKey(). Every function of that name must return the same string.
func (p *goProject) callResult(name string, depth int) (string, bool) {
	result, found := "", false
	for _, fn := range p.funcs {
		if fn.name != name {
			continue
		}
		if fn.decl.Body == nil || fn.decl.Type.Params.NumFields() != 0 || len(fn.decl.Body.List) != 1 {
			return "", false
		}
		ret, ok := fn.decl.Body.List[0].(*ast.ReturnStmt)
		if !ok || len(ret.Results) != 1 {
			return "", false
		}
		v, ok := p.stringValueDepth(ret.Results[0], fn, depth)
		if !ok || found && v != result {
			return "", false
		}
		result, found = v, true
	}
	return result, found
}
