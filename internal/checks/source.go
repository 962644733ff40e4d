package checks

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/report"
)

// Import paths the source checks recognise, under whatever local name a
// file gives them.
const (
	pkgClient    = "sigs.k8s.io/controller-runtime/pkg/client"
	pkgAPIErrors = "k8s.io/apimachinery/pkg/api/errors"
	pkgRetry     = "k8s.io/client-go/util/retry"
)

// goProject is the operator's Go source, parsed (go/parser; no type
// checking, so it works on projects whose dependencies are not downloaded).
type goProject struct {
	dir   string
	fset  *token.FileSet
	files []*goFile
	funcs []*goFunc
	// consts maps constant names to their string values (all packages).
	consts map[string]string
	// constExprs maps constant names to the expressions that define them,
	// with their files (all packages): durations are computed from them.
	constExprs map[string]constExpr
	// varExprs maps package variables to the expressions that initialise
	// them (all packages): a key held in a variable is still that key.
	varExprs map[string]constExpr
	// parseErrors lists files that did not parse.
	parseErrors []string
}

type constExpr struct {
	expr ast.Expr
	file *goFile
}

type goFile struct {
	rel     string
	ast     *ast.File
	imports map[string]string // local name -> import path
}

type goFunc struct {
	name string
	recv string
	decl *ast.FuncDecl
	file *goFile
}

func (f *goFunc) String() string {
	if f.recv != "" {
		return "(" + f.recv + ")." + f.name
	}
	return f.name
}

func (p *goProject) pos(n ast.Node) string {
	pos := p.fset.Position(n.Pos())
	rel, err := filepath.Rel(p.dir, pos.Filename)
	if err != nil {
		rel = pos.Filename
	}
	return fmt.Sprintf("%s:%d", filepath.ToSlash(rel), pos.Line)
}

func (p *goProject) where(f *goFunc) string { return fmt.Sprintf("%s in %s", f, p.pos(f.decl)) }

// loadGoProject parses every non-test .go file of the project, skipping
// vendor, testdata, bin and hidden directories.
func loadGoProject(dir string) (*goProject, error) {
	p := &goProject{dir: dir, fset: token.NewFileSet(), consts: map[string]string{}, constExprs: map[string]constExpr{}, varExprs: map[string]constExpr{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != dir && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "vendor" || name == "testdata" || name == "bin" || name == "node_modules") {
				return filepath.SkipDir
			}
			if path != dir {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		f, err := parser.ParseFile(p.fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			p.parseErrors = append(p.parseErrors, oneLine(err))
			if f == nil {
				return nil
			}
		}
		gf := &goFile{rel: filepath.ToSlash(rel), ast: f, imports: map[string]string{}}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			gf.imports[name] = path
		}
		p.files = append(p.files, gf)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				fn := &goFunc{name: d.Name.Name, decl: d, file: gf}
				if d.Recv != nil && len(d.Recv.List) > 0 {
					fn.recv = typeName(d.Recv.List[0].Type)
				}
				p.funcs = append(p.funcs, fn)
			case *ast.GenDecl:
				if d.Tok == token.VAR {
					for _, spec := range d.Specs {
						vs := spec.(*ast.ValueSpec)
						for i, name := range vs.Names {
							if i < len(vs.Values) && len(vs.Names) == len(vs.Values) {
								p.varExprs[name.Name] = constExpr{expr: vs.Values[i], file: gf}
							}
						}
					}
				}
				if d.Tok != token.CONST {
					continue
				}
				for _, spec := range d.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							p.constExprs[name.Name] = constExpr{expr: vs.Values[i], file: gf}
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								if s, err := strconv.Unquote(lit.Value); err == nil {
									p.consts[name.Name] = s
								}
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(p.files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	return p, nil
}

func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + typeName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return typeName(t.X) + "." + t.Sel.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	}
	return "?"
}

// pkgSel reports whether e is pkg.Name for the import path in f, with Name
// one of names, and returns Name.
func (f *goFile) pkgSel(e ast.Expr, importPath string, names ...string) (string, bool) {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok || f.imports[id.Name] != importPath {
		return "", false
	}
	if len(names) > 0 && !slices.Contains(names, sel.Sel.Name) {
		return "", false
	}
	return sel.Sel.Name, true
}

// mentions reports whether the node refers to an identifier named name
// (as x or pkg.x).
func mentions(n ast.Node, name string) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == name {
			found = true
		}
		return !found
	})
	return found
}

// callGraphFrom returns the functions reachable from roots by name: a
// call (or a reference, as to a handler passed by value) to x or r.x
// reaches every function or method named x. An over-approximation, which
// is what "is it used at all" needs.
func (p *goProject) reachable(roots []*goFunc) map[*goFunc]bool {
	byName := map[string][]*goFunc{}
	for _, f := range p.funcs {
		byName[f.name] = append(byName[f.name], f)
	}
	seen := map[*goFunc]bool{}
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		if seen[f] || f.decl.Body == nil {
			seen[f] = true
			continue
		}
		seen[f] = true
		ast.Inspect(f.decl.Body, func(n ast.Node) bool {
			var name string
			switch x := n.(type) {
			case *ast.Ident:
				name = x.Name
			case *ast.SelectorExpr:
				name = x.Sel.Name
			default:
				return true
			}
			for _, g := range byName[name] {
				if !seen[g] {
					queue = append(queue, g)
				}
			}
			return true
		})
	}
	return seen
}

func (r *run) goProject() (*goProject, error) {
	r.projOnce.Do(func() {
		if r.o.ProjectDir == "" {
			r.projErr = errNoProject
			return
		}
		r.proj, r.projErr = loadGoProject(r.o.ProjectDir)
	})
	return r.proj, r.projErr
}

var errNoProject = errors.New("no project directory")

// project returns the parsed project, or the outcome to report instead.
func (c *Context) project() (*goProject, Outcome, bool) {
	p, err := c.run.goProject()
	if errors.Is(err, errNoProject) {
		return nil, skip("no project directory to read the source from (pass --project DIR)"), false
	}
	if err != nil {
		return nil, errorf("reading the project's Go source: %v", err), false
	}
	return p, Outcome{}, true
}

func init() {
	Register(Typed(Definition{
		Name: "list-with-option",
		Doc:  "a function lists the given list type with the given client list options",
	}, runListWithOption))
	Register(Typed(Definition{
		Name: "conflict-retry",
		Doc:  "an update is retried on conflict (retry.RetryOnConflict, or a loop on errors.IsConflict) re-reading the object; mode reconcile-path: and it is used on the way from Reconcile",
	}, runConflictRetry))
	Register(Typed(Definition{
		Name: "field-index",
		Doc:  "every client.MatchingFields key (by value, however spelled) has an index registered with IndexField; with field: an index on the list's object whose extractor reads the field, queried under its key",
	}, runFieldIndex))
	Register(Typed(Definition{
		Name: "scaffold",
		Doc:  "PROJECT lists the resource and the scaffolded files exist",
	}, runScaffold))
}

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
	for _, fn := range p.funcs {
		if fn.decl.Body == nil {
			continue
		}
		f := fn.file
		ast.Inspect(fn.decl.Body, func(n ast.Node) bool {
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
	}
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
	for _, fn := range p.funcs {
		if fn.decl.Body == nil {
			continue
		}
		f := fn.file
		ast.Inspect(fn.decl.Body, func(n ast.Node) bool {
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
	}
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

type scaffoldParams struct {
	Kind    string   `json:"kind"`
	Group   string   `json:"group"`
	Version string   `json:"version"`
	Files   []string `json:"files"`
}

func (p *scaffoldParams) Validate() error {
	if p.Kind == "" || p.Group == "" || p.Version == "" {
		return errors.New("needs kind, group and version")
	}
	return nil
}

func runScaffold(_ context.Context, c *Context, p *scaffoldParams) Outcome {
	dir := c.ProjectDir()
	if dir == "" {
		return skip("no project directory to read (pass --project DIR)")
	}
	var problems []string
	raw, err := os.ReadFile(filepath.Join(dir, "PROJECT"))
	if err != nil {
		problems = append(problems, "no PROJECT file (the project was not created with kubebuilder init)")
	} else {
		var proj struct {
			Resources []struct {
				Kind    string `json:"kind"`
				Group   string `json:"group"`
				Version string `json:"version"`
			} `json:"resources"`
		}
		if err := yaml.Unmarshal(raw, &proj); err != nil {
			problems = append(problems, "PROJECT does not parse: "+oneLine(err))
		} else {
			found := false
			var have []string
			for _, res := range proj.Resources {
				have = append(have, fmt.Sprintf("%s %s/%s", res.Kind, res.Group, res.Version))
				if res.Kind == p.Kind && res.Group == p.Group && res.Version == p.Version {
					found = true
				}
			}
			if !found {
				problems = append(problems, fmt.Sprintf("PROJECT lists no resource %s %s/%s (has: %s)", p.Kind, p.Group, p.Version, strings.Join(have, ", ")))
			}
		}
	}
	for _, f := range p.Files {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
			problems = append(problems, f+" is missing")
		}
	}
	if len(problems) == 0 {
		return pass("PROJECT lists %s (group %s, version %s) and %s exist", p.Kind, p.Group, p.Version, strings.Join(p.Files, ", "))
	}
	return Outcome{Status: report.Fail, Message: strings.Join(problems, "; "),
		Expected: fmt.Sprintf("kubebuilder create api --group %s --version %s --kind %s: PROJECT entry and %s", p.Group, p.Version, p.Kind, strings.Join(p.Files, ", "))}
}
