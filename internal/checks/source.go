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

// inspectBodies walks the body of every function of the project with
// ast.Inspect, telling visit which function each node is in.
func (p *goProject) inspectBodies(visit func(fn *goFunc, n ast.Node) bool) {
	for _, fn := range p.funcs {
		if fn.decl.Body == nil {
			continue
		}
		ast.Inspect(fn.decl.Body, func(n ast.Node) bool { return visit(fn, n) })
	}
}
