package checks

import (
	"fmt"
	"go/ast"
	"go/token"
	"maps"
	"slices"
	"strings"
)

// The owns-predicate check judges what a predicate does with an update,
// not how it is written: predicate.Funcs, predicate.NewPredicateFuncs,
// GenerationChangedPredicate, predicate.Or/And/Not, a custom type with an
// Update method, helpers it calls. Its Update logic is turned into a
// boolean formula over "field F changed" (an old-vs-new comparison) and
// state conditions (anything else), and judged on its truth table.

// formula is a boolean formula over named atoms.
type formula interface {
	eval(env map[string]bool) bool
	atoms(into map[string]bool)
}

type (
	constF bool
	atomF  string
	notF   struct{ x formula }
	andF   struct{ a, b formula }
	orF    struct{ a, b formula }
	iteF   struct{ c, t, e formula }
)

func (f constF) eval(map[string]bool) bool    { return bool(f) }
func (f atomF) eval(env map[string]bool) bool { return env[string(f)] }
func (f notF) eval(env map[string]bool) bool  { return !f.x.eval(env) }
func (f andF) eval(env map[string]bool) bool  { return f.a.eval(env) && f.b.eval(env) }
func (f orF) eval(env map[string]bool) bool   { return f.a.eval(env) || f.b.eval(env) }
func (f iteF) eval(env map[string]bool) bool {
	return map[bool]formula{true: f.t, false: f.e}[f.c.eval(env)].eval(env)
}
func (constF) atoms(map[string]bool)           {}
func (f atomF) atoms(into map[string]bool)     { into[string(f)] = true }
func (f notF) atoms(into map[string]bool)      { f.x.atoms(into) }
func (f andF) atoms(into map[string]bool)      { f.a.atoms(into); f.b.atoms(into) }
func (f orF) atoms(into map[string]bool)       { f.a.atoms(into); f.b.atoms(into) }
func (f iteF) atoms(into map[string]bool)      { f.c.atoms(into); f.t.atoms(into); f.e.atoms(into) }
func changedAtom(field string) atomF           { return atomF("changed:" + field) }
func isChangeAtom(a string) (string, bool)     { return strings.CutPrefix(a, "changed:") }
func stateAtom(p *goProject, n ast.Node) atomF { return atomF("state:" + p.pos(n)) }

// maxAtoms bounds the truth table (2^12 rows).
const maxAtoms = 12

// boolOf turns a boolean expression into a formula.
func (p *goProject) boolOf(e ast.Expr, s *updateScope) formula {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return p.boolOf(x.X, s)
	case *ast.UnaryExpr:
		if x.Op == token.NOT {
			return notF{p.boolOf(x.X, s)}
		}
	case *ast.BinaryExpr:
		switch x.Op {
		case token.LAND:
			return andF{p.boolOf(x.X, s), p.boolOf(x.Y, s)}
		case token.LOR:
			return orF{p.boolOf(x.X, s), p.boolOf(x.Y, s)}
		case token.EQL, token.NEQ:
			a, b := s.sideOf(x.X), s.sideOf(x.Y)
			fa, fb := s.fieldOf(x.X), s.fieldOf(x.Y)
			if a != noSide && b != noSide && a != b && fa != "" && fa == fb {
				if x.Op == token.NEQ {
					return changedAtom(fa)
				}
				return notF{changedAtom(fa)}
			}
		}
	case *ast.Ident:
		switch {
		case x.Name == "true":
			return constF(true)
		case x.Name == "false":
			return constF(false)
		case s.oks[x.Name]:
			return constF(true)
		case s.bools[x.Name] != nil && s.depth < maxValueDepth:
			inner := s.clone()
			inner.depth++
			delete(inner.bools, x.Name)
			return p.boolOf(s.bools[x.Name], inner)
		}
	case *ast.CallExpr:
		if f := p.inlineCall(x, s); f != nil {
			return f
		}
	}
	return stateAtom(p, e)
}

// inlineCall follows a call of the project's function (changed(old, new))
// into its body, its parameters reading what the arguments read.
func (p *goProject) inlineCall(call *ast.CallExpr, s *updateScope) formula {
	if s.depth >= maxValueDepth {
		return nil
	}
	var name string
	switch f := call.Fun.(type) {
	case *ast.Ident:
		name = f.Name
	case *ast.SelectorExpr:
		name = f.Sel.Name
	default:
		return nil
	}
	for _, fn := range p.funcs {
		if fn.name != name || fn.decl.Body == nil {
			continue
		}
		return p.blockFormula(fn.decl.Body.List, s.calleeScope(p, fn, call.Args))
	}
	return nil
}

// blockFormula is what a function body returns: an if with a return in
// it splits the rest into the two cases. nil: labctl cannot follow it.
func (p *goProject) blockFormula(stmts []ast.Stmt, s *updateScope) formula {
	for i, st := range stmts {
		rest := stmts[i+1:]
		switch x := st.(type) {
		case *ast.AssignStmt:
			s.assign(x.Lhs, x.Rhs)
		case *ast.DeclStmt:
			if gd, ok := x.Decl.(*ast.GenDecl); ok {
				for _, spec := range gd.Specs {
					if vs, ok := spec.(*ast.ValueSpec); ok {
						lhs := make([]ast.Expr, len(vs.Names))
						for j, id := range vs.Names {
							lhs[j] = id
						}
						s.assign(lhs, vs.Values)
					}
				}
			}
		case *ast.BlockStmt:
			return p.blockFormula(append(slices.Clone(x.List), rest...), s)
		case *ast.IfStmt:
			if x.Init != nil {
				return p.blockFormula(append([]ast.Stmt{x.Init, &ast.IfStmt{If: x.If, Cond: x.Cond, Body: x.Body, Else: x.Else}}, rest...), s)
			}
			cond := p.boolOf(x.Cond, s)
			then := p.blockFormula(append(slices.Clone(x.Body.List), rest...), s.clone())
			var elseStmts []ast.Stmt
			if x.Else != nil {
				elseStmts = []ast.Stmt{x.Else}
			}
			els := p.blockFormula(append(elseStmts, rest...), s.clone())
			if then == nil || els == nil {
				return nil
			}
			return iteF{cond, then, els}
		case *ast.SwitchStmt:
			if chain, ok := switchAsIf(x); ok {
				return p.blockFormula(append([]ast.Stmt{chain}, rest...), s)
			}
			if containsReturn(x) {
				return nil
			}
		case *ast.ReturnStmt:
			if len(x.Results) == 1 {
				return p.boolOf(x.Results[0], s)
			}
			return nil
		default:
			// A loop or a type switch that returns: not followed.
			if containsReturn(x) {
				return nil
			}
		}
	}
	return nil // no return: not followed
}

// switchAsIf writes a switch as the if-else chain it means: its cases in
// order (a case's expressions or'ed, compared with the tag if there is
// one), then the default wherever it stands; a case that ends goes on
// after the switch. ok is false for a switch with a break or a
// fallthrough, which that chain does not say.
func switchAsIf(sw *ast.SwitchStmt) (ast.Stmt, bool) {
	branches := false
	ast.Inspect(sw.Body, func(n ast.Node) bool {
		switch n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.BranchStmt:
			branches = true
		}
		return !branches
	})
	if branches {
		return nil, false
	}
	var cases []*ast.CaseClause
	var dflt *ast.CaseClause
	for _, st := range sw.Body.List {
		cc, ok := st.(*ast.CaseClause)
		if !ok {
			return nil, false
		}
		if cc.List == nil {
			dflt = cc
			continue
		}
		cases = append(cases, cc)
	}
	var chain ast.Stmt
	if dflt != nil {
		chain = &ast.BlockStmt{List: dflt.Body}
	}
	for i := len(cases) - 1; i >= 0; i-- {
		var cond ast.Expr
		for _, e := range cases[i].List {
			if sw.Tag != nil {
				// The case's value first: a condition that is no
				// comparison of old and new is named by where it stands.
				e = &ast.BinaryExpr{X: e, Op: token.EQL, Y: sw.Tag}
			}
			if cond == nil {
				cond = e
				continue
			}
			cond = &ast.BinaryExpr{X: cond, Op: token.LOR, Y: e}
		}
		chain = &ast.IfStmt{If: cases[i].Pos(), Cond: cond, Body: &ast.BlockStmt{List: cases[i].Body}, Else: chain}
	}
	if chain == nil {
		chain = &ast.EmptyStmt{}
	}
	if sw.Init != nil {
		chain = &ast.BlockStmt{List: []ast.Stmt{sw.Init, chain}}
	}
	return chain, true
}

func containsReturn(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		_, isReturn := n.(*ast.ReturnStmt)
		found = found || isReturn
		return !found
	})
	return found
}

// funcFormula is the formula of an update function given as a literal or
// by name (a function or method of the project).
func (p *goProject) funcFormula(e ast.Expr) (formula, bool) {
	switch x := e.(type) {
	case *ast.FuncLit:
		f := p.blockFormula(x.Body.List, p.newScope(0))
		return f, f != nil
	case *ast.Ident, *ast.SelectorExpr:
		name := typeName(x)
		name = name[strings.LastIndex(name, ".")+1:]
		for _, fn := range p.funcs {
			if fn.name == name && fn.decl.Body != nil {
				f := p.blockFormula(fn.decl.Body.List, p.newScope(0))
				return f, f != nil
			}
		}
	}
	return nil, false
}

// predicateFormula is what a predicate expression does with an update:
// ok is false when labctl cannot follow it.
func (p *goProject) predicateFormula(e ast.Expr, fn *goFunc, depth int) (formula, bool) {
	if depth > maxValueDepth {
		return nil, false
	}
	depth++
	switch x := e.(type) {
	case *ast.ParenExpr:
		return p.predicateFormula(x.X, fn, depth)
	case *ast.UnaryExpr:
		return p.predicateFormula(x.X, fn, depth)
	case *ast.CompositeLit:
		name := typeName(x.Type)
		name = name[strings.LastIndex(name, ".")+1:]
		switch name {
		case "GenerationChangedPredicate", "TypedGenerationChangedPredicate":
			return changedAtom("Generation"), true
		case "LabelChangedPredicate", "TypedLabelChangedPredicate":
			return changedAtom("Labels"), true
		case "AnnotationChangedPredicate", "TypedAnnotationChangedPredicate":
			return changedAtom("Annotations"), true
		case "ResourceVersionChangedPredicate", "TypedResourceVersionChangedPredicate":
			return constF(true), true
		case "Funcs", "TypedFuncs":
			for _, el := range x.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "UpdateFunc" {
						return p.funcFormula(kv.Value)
					}
				}
			}
			return constF(true), true // Funcs without UpdateFunc passes every update
		}
		// A type of the project: its Update method.
		for _, m := range p.funcs {
			if strings.TrimPrefix(m.recv, "*") == name && m.name == "Update" && m.decl.Body != nil {
				f := p.blockFormula(m.decl.Body.List, p.newScope(0))
				return f, f != nil
			}
		}
	case *ast.CallExpr:
		name := typeName(x.Fun)
		name = name[strings.LastIndex(name, ".")+1:]
		switch name {
		case "Or", "And":
			var out formula
			for _, a := range x.Args {
				f, ok := p.predicateFormula(a, fn, depth)
				if !ok {
					return nil, false
				}
				switch {
				case out == nil:
					out = f
				case name == "Or":
					out = orF{out, f}
				default:
					out = andF{out, f}
				}
			}
			if out == nil {
				return constF(name == "And"), true
			}
			return out, true
		case "Not":
			if len(x.Args) == 1 {
				f, ok := p.predicateFormula(x.Args[0], fn, depth)
				return notF{f}, ok
			}
		case "NewPredicateFuncs", "NewTypedPredicateFuncs":
			// The filter sees the new object only: it can tell a state,
			// never a change.
			if len(x.Args) == 1 {
				if lit, ok := x.Args[0].(*ast.FuncLit); ok {
					s := p.newScope(0)
					if ps := lit.Type.Params.List; len(ps) > 0 && len(ps[0].Names) > 0 {
						s.sides[ps[0].Names[0].Name] = newSide
					}
					f := p.blockFormula(lit.Body.List, s)
					return f, f != nil
				}
				return stateAtom(p, x), true
			}
		}
		// A function of the project that returns the predicate.
		for _, g := range p.funcs {
			if g.name == name && g.decl.Body != nil && len(g.decl.Body.List) > 0 {
				if ret, ok := g.decl.Body.List[len(g.decl.Body.List)-1].(*ast.ReturnStmt); ok && len(ret.Results) == 1 {
					return p.predicateFormula(ret.Results[0], g, depth)
				}
			}
		}
	case *ast.Ident, *ast.SelectorExpr:
		name := typeName(x)
		name = name[strings.LastIndex(name, ".")+1:]
		if fn != nil {
			if v, ok := localExpr(name, fn); ok {
				return p.predicateFormula(v, fn, depth)
			}
		}
		if v, ok := p.varExprs[name]; ok {
			return p.predicateFormula(v.expr, nil, depth)
		}
	}
	return nil, false
}

// localExpr is the one value fn assigns to a local variable.
func localExpr(name string, fn *goFunc) (ast.Expr, bool) {
	var values []ast.Expr
	ast.Inspect(fn.decl.Body, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			for i, l := range s.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name == name && len(s.Lhs) == len(s.Rhs) {
					values = append(values, s.Rhs[i])
				}
			}
		case *ast.ValueSpec:
			for i, id := range s.Names {
				if id.Name == name && i < len(s.Values) {
					values = append(values, s.Values[i])
				}
			}
		}
		return true
	})
	if len(values) != 1 {
		return nil, false
	}
	return values[0], true
}

// judgeUpdates says what is wrong with a predicate that must let an update
// through exactly when one of fields changed ("" when nothing): every
// update changing one of them must pass, whatever else holds, and an
// update changing none of them (status churn) must be filtered, at least
// in some state.
func judgeUpdates(f formula, fields []string) (problem string, ok bool) {
	set := map[string]bool{}
	f.atoms(set)
	for _, field := range fields {
		set[string(changedAtom(field))] = true
	}
	atoms := slices.Sorted(maps.Keys(set))
	if len(atoms) > maxAtoms {
		return "", false
	}
	var dropped []string
	filtersChurn := false
	for bits := 0; bits < 1<<len(atoms); bits++ {
		env := map[string]bool{}
		anyChange, wanted := false, []string{}
		for i, a := range atoms {
			env[a] = bits&(1<<i) != 0
			if field, isChange := isChangeAtom(a); isChange && env[a] {
				anyChange = true
				if slices.Contains(fields, field) {
					wanted = append(wanted, field)
				}
			}
		}
		passes := f.eval(env)
		if len(wanted) > 0 && !passes {
			dropped = append(dropped, strings.Join(wanted, " and "))
		}
		if !anyChange && !passes {
			filtersChurn = true
		}
	}
	if len(dropped) > 0 {
		slices.SortFunc(dropped, func(a, b string) int { return len(a) - len(b) })
		return fmt.Sprintf("it drops an update that changes %s: the controller misses that change", dropped[0]), true
	}
	if !filtersChurn {
		return fmt.Sprintf("it lets through updates that change none of %s (status churn): it filters nothing", strings.Join(fields, ", ")), true
	}
	return "", true
}
