package checks

import (
	"context"
	"errors"
	"go/ast"
	"slices"
	"strings"

	"github.com/labctl/labctl/internal/report"
)

type conflictRetryParams struct {
	// Mode: "helper" (a retry on conflict exists) or "reconcile-path" (and
	// Reconcile reaches it).
	Mode string `json:"mode"`
}

func (p *conflictRetryParams) Validate() error {
	if p.Mode != "helper" && p.Mode != "reconcile-path" {
		return errors.New("mode is helper or reconcile-path")
	}
	return nil
}

// retrySite is a function that retries on conflict.
type retrySite struct {
	fn     *goFunc
	how    string
	reread bool
}

func (p *goProject) retrySites() []retrySite {
	var out []retrySite
	p.inspectBodies(func(fn *goFunc, n ast.Node) bool {
		f := fn.file
		switch x := n.(type) {
		case *ast.CallExpr:
			name, ok := f.pkgSel(x.Fun, pkgRetry, "RetryOnConflict", "OnError")
			if !ok {
				return true
			}
			if name == "OnError" && !slices.ContainsFunc(x.Args, func(a ast.Expr) bool {
				_, ok := f.pkgSel(a, pkgAPIErrors, "IsConflict")
				return ok
			}) {
				return true
			}
			site := retrySite{fn: fn, how: "retry." + name, reread: true}
			if lit, ok := x.Args[len(x.Args)-1].(*ast.FuncLit); ok {
				site.reread = callsMethod(lit.Body, "Get")
			}
			out = append(out, site)
		case *ast.ForStmt, *ast.RangeStmt:
			var body *ast.BlockStmt
			if fs, ok := x.(*ast.ForStmt); ok {
				body = fs.Body
			} else {
				body = x.(*ast.RangeStmt).Body
			}
			conflict := false
			ast.Inspect(body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if _, ok := f.pkgSel(call.Fun, pkgAPIErrors, "IsConflict"); ok {
						conflict = true
					}
				}
				return !conflict
			})
			if conflict {
				out = append(out, retrySite{fn: fn, how: "a loop on errors.IsConflict", reread: callsMethod(body, "Get")})
				return false
			}
		}
		return true
	})
	return out
}

// callsMethod reports whether the node calls x.name(...).
func callsMethod(n ast.Node, name string) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == name {
				found = true
			}
		}
		return !found
	})
	return found
}

func runConflictRetry(_ context.Context, c *Context, p *conflictRetryParams) Outcome {
	proj, out, ok := c.project()
	if !ok {
		return out
	}
	sites := proj.retrySites()
	var good []retrySite
	var noReread []string
	for _, s := range sites {
		if s.reread {
			good = append(good, s)
		} else {
			noReread = append(noReread, proj.where(s.fn))
		}
	}
	if len(good) == 0 {
		o := Outcome{Status: report.Fail,
			Message:  "no update is retried on conflict: found neither retry.RetryOnConflict nor a loop on errors.IsConflict that re-reads the object",
			Expected: "retry.RetryOnConflict (or a loop on errors.IsConflict) that re-reads the object with Get before each new attempt"}
		if len(noReread) > 0 {
			o.Observed = "retries that never re-read the object (each attempt resends the stale one): " + strings.Join(noReread, "; ")
		}
		return o
	}
	if p.Mode == "helper" {
		s := good[0]
		return pass("%s retries on conflict with %s, re-reading the object", proj.where(s.fn), s.how)
	}
	var roots []*goFunc
	for _, f := range proj.funcs {
		if f.name == "Reconcile" && f.recv != "" {
			roots = append(roots, f)
		}
	}
	if len(roots) == 0 {
		return fail("no Reconcile method found in the project")
	}
	reach := proj.reachable(roots)
	var unused []string
	for _, s := range good {
		if reach[s.fn] {
			return pass("%s (retry on conflict with %s) is called on the way from Reconcile", proj.where(s.fn), s.how)
		}
		unused = append(unused, proj.where(s.fn))
	}
	return Outcome{Status: report.Fail,
		Message:  "the retry on conflict is never used: nothing called from Reconcile reaches " + strings.Join(unused, "; "),
		Expected: "the reconciliation updates children through the retry helper",
		Observed: "not reachable from any Reconcile method"}
}
