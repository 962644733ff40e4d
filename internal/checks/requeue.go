package checks

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/printer"
	"go/token"
	"strconv"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/report"
)

// Packages whose Result type a Reconcile returns.
const (
	pkgCtrl      = "sigs.k8s.io/controller-runtime"
	pkgReconcile = "sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func init() {
	Register(Typed(Definition{
		Name: "requeue-after",
		Doc:  "on the way from Reconcile a result asks for a delayed requeue (ctrl.Result{RequeueAfter: ...}), not only an immediate one (Requeue: true)",
	}, runRequeueAfter))
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
	// value is the expression assigned to the field.
	value ast.Expr
}

func (p *goProject) requeueSites() []requeueSite {
	var out []requeueSite
	p.inspectBodies(func(fn *goFunc, n ast.Node) bool {
		f := fn.file
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
					out = append(out, requeueSite{fn: fn, node: x, field: k.Name, value: kv.Value})
				}
			}
		case *ast.AssignStmt:
			for i, lhs := range x.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && (sel.Sel.Name == "RequeueAfter" || sel.Sel.Name == "Requeue") {
					site := requeueSite{fn: fn, node: x, field: sel.Sel.Name}
					if len(x.Rhs) == len(x.Lhs) {
						site.value = x.Rhs[i]
					}
					out = append(out, site)
				}
			}
		}
		return true
	})
	return out
}

func runRequeueAfter(_ context.Context, c *Context, p *requeueParams) Outcome {
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
	var immediate, busy []string
	var delayed *requeueSite
	for _, s := range proj.requeueSites() {
		if !reach[s.fn] {
			continue
		}
		if s.field != "RequeueAfter" {
			immediate = append(immediate, proj.pos(s.node))
			continue
		}
		// The delay is read for its value, not its spelling: a bare 10 or
		// time.Duration(10) is ten nanoseconds, a busy loop.
		if s.value != nil {
			if d, ok := proj.durationOf(s.fn.file, s.value, 0); ok && d < float64(busyRequeue) {
				busy = append(busy, fmt.Sprintf("RequeueAfter: %s = %s at %s", exprString(proj.fset, s.value), time.Duration(d), proj.pos(s.node)))
				continue
			}
		}
		if delayed == nil {
			delayed = &s
		}
	}
	if len(busy) > 0 {
		return Outcome{Status: report.Fail,
			Message:  fmt.Sprintf("a RequeueAfter on the way from %s is shorter than %s, a busy loop rather than a delay: %s (a time.Duration counts nanoseconds: write 10 * time.Second)", roots[0], busyRequeue, strings.Join(busy, "; ")),
			Expected: "ctrl.Result{RequeueAfter: 10 * time.Second}: a delay in seconds",
			Observed: strings.Join(busy, "; ")}
	}
	if delayed != nil {
		return pass("%s asks for a delayed requeue (RequeueAfter) at %s", delayed.fn, proj.pos(delayed.node))
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

// busyRequeue is the delay below which a RequeueAfter is a busy loop, not
// "look again later": a bare 10 is ten nanoseconds.
const busyRequeue = 100 * time.Millisecond

var timeUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

// durationOf computes a constant duration expression (10 * time.Second,
// time.Duration(30), a const defined as either) the way the compiler
// does; ok is false for anything it cannot know without running the code.
func (p *goProject) durationOf(f *goFile, e ast.Expr, depth int) (float64, bool) {
	if depth > 8 {
		return 0, false
	}
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind == token.INT || x.Kind == token.FLOAT {
			v, err := strconv.ParseFloat(strings.ReplaceAll(x.Value, "_", ""), 64)
			return v, err == nil
		}
	case *ast.ParenExpr:
		return p.durationOf(f, x.X, depth+1)
	case *ast.SelectorExpr:
		if unit, ok := f.pkgSel(x, "time"); ok {
			d, known := timeUnits[unit]
			return float64(d), known
		}
		if id, ok := x.X.(*ast.Ident); ok && f.imports[id.Name] != "" {
			if c, ok := p.constExprs[x.Sel.Name]; ok {
				return p.durationOf(c.file, c.expr, depth+1)
			}
		}
	case *ast.Ident:
		if c, ok := p.constExprs[x.Name]; ok {
			return p.durationOf(c.file, c.expr, depth+1)
		}
	case *ast.CallExpr:
		if _, ok := f.pkgSel(x.Fun, "time", "Duration"); ok && len(x.Args) == 1 {
			return p.durationOf(f, x.Args[0], depth+1)
		}
	case *ast.BinaryExpr:
		a, okA := p.durationOf(f, x.X, depth+1)
		b, okB := p.durationOf(f, x.Y, depth+1)
		if !okA || !okB {
			return 0, false
		}
		switch x.Op {
		case token.MUL:
			return a * b, true
		case token.QUO:
			if b != 0 {
				return a / b, true
			}
		case token.ADD:
			return a + b, true
		case token.SUB:
			return a - b, true
		}
	}
	return 0, false
}

// exprString prints an expression as it reads in the source.
func exprString(fset *token.FileSet, e ast.Expr) string {
	var b bytes.Buffer
	if err := printer.Fprint(&b, fset, e); err != nil {
		return "?"
	}
	return b.String()
}
