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
	Register(Definition{
		Name:   "owns-predicate",
		Doc:    "the controller's Owns of a kind has builder.WithPredicates whose predicate compares the given fields (lab 4.3: Generation, ReadyReplicas)",
		Params: func() any { return &ownsPredicateParams{} },
		Run:    runOwnsPredicate,
	})
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

func runOwnsPredicate(_ context.Context, c *Context, params any) Outcome {
	p := params.(*ownsPredicateParams)
	proj, out, ok := c.project()
	if !ok {
		return out
	}
	owns, preds := proj.ownsPredicates(p.Kind)
	expected := fmt.Sprintf("Owns(&%s{}, builder.WithPredicates(...)) with a predicate comparing %s", p.Kind, strings.Join(p.Fields, " and "))
	if len(owns) == 0 {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("no Owns(&%s{}) found", p.Kind), Expected: expected, Observed: "none"}
	}
	if len(preds) == 0 {
		return Outcome{Status: report.Fail,
			Message:  fmt.Sprintf("Owns(&%s{}) at %s has no builder.WithPredicates: every change of the %s wakes the controller", p.Kind, strings.Join(owns, ", "), p.Kind),
			Expected: expected, Observed: "Owns without predicates"}
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
	return pass("Owns(&%s{}) at %s filters events with a predicate reading %s", p.Kind, strings.Join(owns, ", "), strings.Join(p.Fields, " and "))
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

// ownsPredicates finds the Owns(&Kind{}, ...) calls (their positions) and
// the code of the predicates passed to them with builder.WithPredicates:
// inline, or a function or package variable of the project named there.
func (p *goProject) ownsPredicates(kind string) (owns []string, preds []ast.Node) {
	for _, fn := range p.funcs {
		if fn.decl.Body == nil {
			continue
		}
		ast.Inspect(fn.decl.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Owns" || !mentions(call.Args[0], kind) {
				return true
			}
			owns = append(owns, p.pos(call))
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
						preds = append(preds, arg)
						preds = append(preds, p.definitionsNamedIn(arg)...)
					}
					return false
				})
			}
			return true
		})
	}
	return owns, preds
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
