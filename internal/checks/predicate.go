package checks

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"strings"

	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name: "owns-predicate",
		Doc:  "the controller's Owns of a kind has builder.WithPredicates that lets an update through exactly when one of the given fields changes (lab 4.3: Generation, ReadyReplicas), judged by its logic however written",
	}, runOwnsPredicate))
}

type ownsPredicateParams struct {
	// Kind is the owned type: StatefulSet.
	Kind string `json:"kind"`
	// Fields are names the predicate must read (a field or its getter:
	// Generation matches .Generation and .GetGeneration()).
	Fields []string `json:"fields"`
}

func (p *ownsPredicateParams) Validate() error {
	if p.Kind == "" || len(p.Fields) == 0 {
		return errors.New("needs kind and fields")
	}
	return nil
}

func runOwnsPredicate(_ context.Context, c *Context, p *ownsPredicateParams) Outcome {
	proj, out, ok := c.project()
	if !ok {
		return out
	}
	sites := proj.ownsPredicates(p.Kind)
	expected := fmt.Sprintf("Owns(&%s{}, builder.WithPredicates(...)) with a predicate that lets an update through when %s changes (old and new compared), and not when none does", p.Kind, strings.Join(p.Fields, " or "))
	if len(sites) == 0 {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("no Owns(&%s{}) found", p.Kind), Expected: expected, Observed: "none"}
	}
	var owns []string
	var filtered []ownsSite
	for _, s := range sites {
		owns = append(owns, s.at)
		if len(s.preds) > 0 {
			filtered = append(filtered, s)
		}
	}
	if len(filtered) == 0 {
		return Outcome{Status: report.Fail,
			Message:  fmt.Sprintf("Owns(&%s{}) at %s has no builder.WithPredicates: every change of the %s wakes the controller", p.Kind, strings.Join(owns, ", "), p.Kind),
			Expected: expected, Observed: "Owns without predicates"}
	}
	// The logic, where labctl can follow it.
	var problems []string
	followed := true
	for _, s := range filtered {
		f, ok := proj.sitePredicate(s)
		if !ok {
			followed = false
			continue
		}
		problem, ok := judgeUpdates(f, p.Fields)
		if !ok {
			followed = false
			continue
		}
		if problem == "" {
			return pass("Owns(&%s{}) at %s lets a %s update through exactly when %s changes", p.Kind, s.at, p.Kind, strings.Join(p.Fields, " or "))
		}
		problems = append(problems, fmt.Sprintf("the predicate on Owns(&%s{}) at %s: %s", p.Kind, s.at, problem))
	}
	if len(problems) > 0 && followed {
		return Outcome{Status: report.Fail, Message: strings.Join(problems, "; "), Expected: expected, Observed: "a predicate with other logic"}
	}
	// A predicate labctl cannot follow (a type from another module, a
	// value built at run time) is judged by the fields it reads.
	var preds []ast.Node
	for _, s := range filtered {
		preds = append(preds, s.code...)
	}
	var missing []string
	for _, f := range p.Fields {
		if !slicesAnyMentions(preds, f, "Get"+f) {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return Outcome{Status: report.Fail,
			Message:  fmt.Sprintf("the predicate on Owns(&%s{}) (%s) never reads %s", p.Kind, strings.Join(owns, ", "), strings.Join(missing, ", ")),
			Expected: expected, Observed: "a predicate without " + strings.Join(missing, ", ")}
	}
	out = pass("Owns(&%s{}) at %s filters events with a predicate reading %s", p.Kind, strings.Join(owns, ", "), strings.Join(p.Fields, " and "))
	out.Notes = append(out.Notes, "labctl could not follow the predicate's logic; it was judged by the fields it reads")
	return out
}

// sitePredicate is the formula of the predicates of one Owns: all of
// them must pass (builder.WithPredicates ands them).
func (p *goProject) sitePredicate(s ownsSite) (formula, bool) {
	var out formula
	for _, e := range s.preds {
		f, ok := p.predicateFormula(e, s.fn, 0)
		if !ok {
			return nil, false
		}
		if out == nil {
			out = f
		} else {
			out = andF{out, f}
		}
	}
	return out, out != nil
}

func slicesAnyMentions(nodes []ast.Node, names ...string) bool {
	for _, n := range nodes {
		for _, name := range names {
			if mentions(n, name) {
				return true
			}
		}
	}
	return false
}

// ownsSite is one Owns(&Kind{}, ...) call: where, the predicates passed
// with builder.WithPredicates, and their code with the project's functions
// and package variables they name.
type ownsSite struct {
	at    string
	fn    *goFunc
	preds []ast.Expr
	code  []ast.Node
}

// ownsPredicates finds the Owns(&Kind{}, ...) calls and the predicates
// passed to them with builder.WithPredicates: inline, or a function or
// variable of the project named there.
func (p *goProject) ownsPredicates(kind string) []ownsSite {
	var sites []ownsSite
	p.inspectBodies(func(fn *goFunc, n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Owns" || !mentions(call.Args[0], kind) {
			return true
		}
		site := ownsSite{at: p.pos(call), fn: fn}
		for _, opt := range call.Args[1:] {
			ast.Inspect(opt, func(n ast.Node) bool {
				wp, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if s, ok := wp.Fun.(*ast.SelectorExpr); !ok || s.Sel.Name != "WithPredicates" {
					return true
				}
				for _, arg := range wp.Args {
					site.preds = append(site.preds, arg)
					site.code = append(site.code, arg)
					site.code = append(site.code, p.definitionsNamedIn(arg)...)
				}
				return false
			})
		}
		sites = append(sites, site)
		return true
	})
	return sites
}

// definitionsNamedIn returns the bodies of the project's functions and the
// values of its package variables whose names the expression uses, and
// theirs in turn (a predicate variable calling a helper).
func (p *goProject) definitionsNamedIn(e ast.Expr) []ast.Node {
	defs := map[string][]ast.Node{}
	for _, fn := range p.funcs {
		if fn.decl.Body != nil {
			defs[fn.name] = append(defs[fn.name], fn.decl.Body)
		}
	}
	for _, f := range p.files {
		for _, d := range f.ast.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						defs[id.Name] = append(defs[id.Name], vs.Values[i])
					}
				}
			}
		}
	}
	seen := map[string]bool{}
	var out []ast.Node
	queue := []ast.Node{e}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		ast.Inspect(n, func(n ast.Node) bool {
			var name string
			switch x := n.(type) {
			case *ast.Ident:
				name = x.Name
			case *ast.SelectorExpr:
				name = x.Sel.Name
			default:
				return true
			}
			if !seen[name] {
				seen[name] = true
				out = append(out, defs[name]...)
				queue = append(queue, defs[name]...)
			}
			return true
		})
	}
	return out
}
