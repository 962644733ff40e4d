package checks

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"slices"
	"sort"
	"strings"

	"github.com/labctl/labctl/internal/report"
)

type listOptionParams struct {
	// List is the list type the function lists (DatabaseList).
	List string `json:"list"`
	// Options: the List call uses one of these client list options.
	Options []string `json:"options"`
	// Without: and none of these.
	Without []string `json:"without,omitempty"`
}

func (p *listOptionParams) Validate() error {
	if p.List == "" || len(p.Options) == 0 {
		return errors.New("needs list and options")
	}
	return nil
}

// listCall is one r.List(ctx, list, opts...) call and the options it uses.
type listCall struct {
	fn      *goFunc
	call    *ast.CallExpr
	options []string
}

// listCalls finds every X.List(ctx, obj, ...) call and the client list
// options passed to it, directly or through a slice variable built in the
// same function (opts := []client.ListOption{...}; opts = append(opts, ...)).
func (p *goProject) listCalls() []listCall {
	var out []listCall
	p.inspectBodies(func(fn *goFunc, n ast.Node) bool {
		f := fn.file
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "List" || len(call.Args) < 2 {
			return true
		}
		if _, isPkg := f.pkgSel(sel, pkgClient); isPkg {
			return true
		}
		lc := listCall{fn: fn, call: call}
		for i, arg := range call.Args[2:] {
			if id, ok := arg.(*ast.Ident); ok && call.Ellipsis.IsValid() && i == len(call.Args)-3 {
				lc.options = append(lc.options, optionsAssignedTo(fn, id.Name)...)
				continue
			}
			lc.options = append(lc.options, clientOptions(f, arg)...)
		}
		out = append(out, lc)
		return true
	})
	return out
}

// clientOptions names the client list options in an expression:
// client.InNamespace(ns), client.MatchingLabels{...}, &client.ListOptions{Namespace: ...}.
func clientOptions(f *goFile, e ast.Expr) []string {
	var out []string
	ast.Inspect(e, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if name, ok := f.pkgSel(x.Fun, pkgClient); ok {
				out = append(out, name)
			}
		case *ast.CompositeLit:
			name, ok := f.pkgSel(x.Type, pkgClient)
			if !ok {
				return true
			}
			if name != "ListOptions" {
				out = append(out, name)
				return true
			}
			for _, el := range x.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				switch k, _ := kv.Key.(*ast.Ident); {
				case k == nil:
				case k.Name == "Namespace":
					out = append(out, "InNamespace")
				case k.Name == "LabelSelector":
					out = append(out, "MatchingLabelsSelector")
				case k.Name == "FieldSelector":
					out = append(out, "MatchingFieldsSelector")
				}
			}
		}
		return true
	})
	return out
}

func optionsAssignedTo(fn *goFunc, name string) []string {
	var out []string
	ast.Inspect(fn.decl.Body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, id := range vs.Names {
					if id.Name == name && i < len(vs.Values) {
						out = append(out, clientOptions(fn.file, vs.Values[i])...)
					}
				}
			}
			return true
		}
		for i, lhs := range as.Lhs {
			if id, ok := lhs.(*ast.Ident); ok && id.Name == name && i < len(as.Rhs) {
				out = append(out, clientOptions(fn.file, as.Rhs[i])...)
			}
		}
		return true
	})
	return out
}

func runListWithOption(_ context.Context, c *Context, p *listOptionParams) Outcome {
	proj, out, ok := c.project()
	if !ok {
		return out
	}
	var near []string
	for _, lc := range proj.listCalls() {
		if !mentions(lc.fn.decl, p.List) {
			continue
		}
		has := slices.ContainsFunc(lc.options, func(o string) bool { return slices.Contains(p.Options, o) })
		bad := slices.ContainsFunc(lc.options, func(o string) bool { return slices.Contains(p.Without, o) })
		if has && !bad {
			return pass("%s lists %s with client.%s", proj.where(lc.fn), p.List, strings.Join(uniq(lc.options), ", client."))
		}
		opts := "no options"
		if len(lc.options) > 0 {
			opts = "client." + strings.Join(uniq(lc.options), ", client.")
		}
		near = append(near, fmt.Sprintf("%s (%s)", proj.where(lc.fn), opts))
	}
	want := fmt.Sprintf("a function that lists %s with client.%s", p.List, strings.Join(p.Options, " or client."))
	if len(p.Without) > 0 {
		want += " alone"
	}
	observed := "no List call on a " + p.List
	if len(near) > 0 {
		observed = "List calls on " + p.List + ": " + strings.Join(near, "; ")
	}
	return Outcome{Status: report.Fail, Message: fmt.Sprintf("no function lists %s with client.%s", p.List, strings.Join(p.Options, " or client.")),
		Expected: want, Observed: observed}
}

func uniq(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return slices.Compact(out)
}
