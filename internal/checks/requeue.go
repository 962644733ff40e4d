package checks

import (
	"context"
	"go/ast"
	"strings"
)

// Packages whose Result type a Reconcile returns.
const (
	pkgCtrl      = "sigs.k8s.io/controller-runtime"
	pkgReconcile = "sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func init() {
	Register(Definition{
		Name:   "requeue-after",
		Doc:    "on the way from Reconcile a result asks for a delayed requeue (ctrl.Result{RequeueAfter: ...}), not only an immediate one (Requeue: true)",
		Params: func() any { return &requeueParams{} },
		Run:    runRequeueAfter,
	})
}

type requeueParams struct {
	// Reconciler limits the roots to the Reconcile method of this type
	// (HelloWorldReconciler); every Reconcile when empty.
	Reconciler string `json:"reconciler,omitempty"`
}

// requeueSite is a ctrl.Result literal (or a .RequeueAfter assignment) that
// sets a requeue field.
type requeueSite struct {
	fn    *goFunc
	node  ast.Node
	field string // RequeueAfter or Requeue
}

func (p *goProject) requeueSites() []requeueSite {
	var out []requeueSite
	for _, fn := range p.funcs {
		if fn.decl.Body == nil {
			continue
		}
		f := fn.file
		ast.Inspect(fn.decl.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				if _, ok := f.pkgSel(x.Type, pkgCtrl, "Result"); !ok {
					if _, ok := f.pkgSel(x.Type, pkgReconcile, "Result"); !ok {
						return true
					}
				}
				for _, el := range x.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "RequeueAfter" || k.Name == "Requeue") {
						out = append(out, requeueSite{fn: fn, node: x, field: k.Name})
					}
				}
			case *ast.AssignStmt:
				for _, lhs := range x.Lhs {
					if sel, ok := lhs.(*ast.SelectorExpr); ok && (sel.Sel.Name == "RequeueAfter" || sel.Sel.Name == "Requeue") {
						out = append(out, requeueSite{fn: fn, node: x, field: sel.Sel.Name})
					}
				}
			}
			return true
		})
	}
	return out
}

func runRequeueAfter(_ context.Context, c *Context, params any) Outcome {
	p := params.(*requeueParams)
	proj, out, ok := c.project()
	if !ok {
		return out
	}
	var roots []*goFunc
	for _, f := range proj.funcs {
		if f.name == "Reconcile" && f.recv != "" && (p.Reconciler == "" || strings.TrimPrefix(f.recv, "*") == p.Reconciler) {
			roots = append(roots, f)
		}
	}
	if len(roots) == 0 {
		if p.Reconciler != "" {
			return fail("no Reconcile method of %s found in the project", p.Reconciler)
		}
		return fail("no Reconcile method found in the project")
	}
	reach := proj.reachable(roots)
	var immediate []string
	for _, s := range proj.requeueSites() {
		if !reach[s.fn] {
			continue
		}
		if s.field == "RequeueAfter" {
			return pass("%s asks for a delayed requeue (RequeueAfter) at %s", s.fn, proj.pos(s.node))
		}
		immediate = append(immediate, proj.pos(s.node))
	}
	o := fail("no result on the way from %s sets RequeueAfter", roots[0])
	o.Expected = "return ctrl.Result{RequeueAfter: 10 * time.Second}, nil where something must be looked at again later"
	if len(immediate) > 0 {
		o.Observed = "only Requeue: true (an immediate, rate-limited requeue) at " + strings.Join(immediate, ", ")
	} else {
		o.Observed = "no requeue at all"
	}
	return o
}
