// Package testmutant makes mutants of a student's controller package, to
// learn whether the student's own tests would catch a bug: the package is
// instrumented once (every write the controller makes through its client,
// and its Reconcile, pass through labctl's wrappers) and built through a
// go build -overlay, so the student's files are never changed; which
// mutant is alive is chosen when the tests run, by LABCTL_MUTANT (mutant
// schemata: one compile serves every mutant).
//
// The mutants act on what the controller does, not on how its code is
// spelled: "the Secret is never created" drops every Create of a Secret,
// whichever function, file or helper makes it.
package testmutant

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// EnvVar holds the token of the mutant that is alive in an instrumented
// build. Tokens are random, made afresh for each instrumentation, and
// every run sets the variable (to a token no mutant has when none is
// alive), so a test cannot tell a mutant's run from its own by looking
// at its environment: only by what the controller does.
const EnvVar = "LABCTL_MUTANT"

// FiredPrefix starts the line an instrumented test binary prints on its
// standard output the first time its mutant changes what the controller
// does: a mutant that never fired was never reached by the tests.
const FiredPrefix = "labctl-mutant-fired: "

// Mutant is one bug labctl can put in a controller.
type Mutant struct {
	Name string
	// Doc says what the controller then does wrong, as a hint finishes
	// "your tests pass on a controller that ...".
	Doc string
	// NeedsReconcile: the mutant wraps the reconciler's Reconcile method.
	NeedsReconcile bool
}

// Catalogue is every mutant, by name.
var Catalogue = []Mutant{
	{Name: "phase-stuck", Doc: "never writes a phase after Pending (its status writes that advance the phase are dropped)"},
	{Name: "ready-early", Doc: "reports status.ready=true in every status it writes, while still provisioning"},
	{Name: "no-secret", Doc: "never creates the Secret"},
	{Name: "no-statefulset", Doc: "never creates the StatefulSet"},
	{Name: "statefulset-image", Doc: "gives the StatefulSet's containers the image postgres:latest instead of spec.image"},
	{Name: "statefulset-replicas", Doc: "gives the StatefulSet one replica more than spec.replicas"},
	{Name: "no-service", Doc: "never creates the Service"},
	{Name: "no-finalizer", Doc: "never adds its finalizer (every update it makes drops the finalizers)"},
	{Name: "notfound-error", Doc: "returns an error when the Database it is asked to reconcile does not exist", NeedsReconcile: true},
	{Name: "notfound-requeue", Doc: "requeues a Database that does not exist instead of forgetting it", NeedsReconcile: true},
}

// Lookup returns the mutant named name.
func Lookup(name string) (Mutant, bool) {
	i := slices.IndexFunc(Catalogue, func(m Mutant) bool { return m.Name == name })
	if i < 0 {
		return Mutant{}, false
	}
	return Catalogue[i], true
}

// Instrumented is a controller package ready to be built with mutants.
type Instrumented struct {
	// Files maps each file of the package labctl changed (or added) to
	// its new content.
	Files map[string][]byte
	// Reconcile is set when the reconciler's Reconcile method was found
	// and wrapped (the mutants that need it can run).
	Reconcile bool
	// Writes counts the client calls that were wrapped.
	Writes int
	// tokens are the mutants' tokens, by name.
	tokens map[string]string
}

// Env is the environment entry that makes mutant alive in a run of the
// instrumented build; "" is none, a token of no mutant (fresh each call).
func (in *Instrumented) Env(mutant string) string {
	if t, ok := in.tokens[mutant]; ok && mutant != "" {
		return EnvVar + "=" + t
	}
	return OffEnv()
}

// OffEnv is the environment entry of a run with no mutant alive: a fresh
// random token, so the project's own runs look like its mutants' runs.
func OffEnv() string { return EnvVar + "=" + newToken() }

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// GeneratedFile is the file added to the package.
const GeneratedFile = "zz_labctl_mutants.go"

// Instrument reads the Go files (not the tests) of the package in dir and
// wraps the client calls they make and, if reconciler (a type name such as
// DatabaseReconciler) has a Reconcile method there, that method.
//
// It runs as the grader, outside any box, on a submission's files: it
// reads regular files only, never through a symbolic link (one could
// point at a file only the grader may read, and a parse error quotes it).
func Instrument(dir, reconciler string) (*Instrumented, error) {
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
		return nil, errors.New("the controller package is not a directory (a symbolic link?)")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the controller package: %w", err)
	}
	fset := token.NewFileSet()
	out := &Instrumented{Files: map[string][]byte{}, tokens: map[string]string{}}
	for _, m := range Catalogue {
		out.tokens[m.Name] = newToken()
	}
	pkgName := ""
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", name, err)
		}
		if pkgName == "" {
			pkgName = f.Name.Name
		}
		changed := rewriteCalls(f, controllerutilName(f), &out.Writes)
		if renameReconcile(f, reconciler) {
			out.Reconcile, changed = true, true
		}
		if !changed {
			continue
		}
		var buf bytes.Buffer
		if err := (&printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}).Fprint(&buf, fset, f); err != nil {
			return nil, fmt.Errorf("printing %s: %w", name, err)
		}
		out.Files[path] = buf.Bytes()
	}
	if pkgName == "" {
		return nil, errors.New("the controller package has no Go file")
	}
	out.Files[filepath.Join(dir, GeneratedFile)] = []byte(generated(pkgName, reconciler, out.Reconcile, out.tokens))
	return out, nil
}

// WriteOverlay writes the instrumented files and go's overlay description
// into dir and returns the description's path (go build -overlay=PATH).
func (in *Instrumented) WriteOverlay(dir string) (string, error) {
	replace := map[string]string{}
	names := make([]string, 0, len(in.Files))
	for p := range in.Files {
		names = append(names, p)
	}
	slices.Sort(names)
	for i, p := range names {
		dst := filepath.Join(dir, strconv.Itoa(i)+"_"+filepath.Base(p))
		if err := os.WriteFile(dst, in.Files[p], 0o644); err != nil {
			return "", err
		}
		replace[p] = dst
	}
	raw, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	desc := filepath.Join(dir, "overlay.json")
	return desc, os.WriteFile(desc, raw, 0o644)
}

const (
	controllerutilPath = "sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	wrapperPrefix      = "labctlMut"
	originalReconcile  = "labctlMutOriginalReconcile"
)

// controllerutilName is the name the file imports controllerutil under
// ("" when it does not).
func controllerutilName(f *ast.File) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == controllerutilPath {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return "controllerutil"
		}
	}
	return ""
}

// clientMethods are the client calls wrapped, with how many arguments
// they take at least.
var clientMethods = map[string]int{"Create": 2, "Update": 2, "Patch": 3, "Get": 3}

// rewriteCalls turns x.Create(ctx, obj, ...) into
// labctlMutCreate(x, ctx, obj, ...) (and Update, Patch, Get; x.Status().Update
// into labctlMutStatusUpdate(x.Status(), ...)), and controllerutil's
// CreateOrUpdate and CreateOrPatch into labctl's. The wrappers' type
// parameters accept only what has the client's method, so a call of
// another type's Create does not compile, and the mutants cannot run
// rather than run wrong.
func rewriteCalls(f *ast.File, cu string, count *int) bool {
	changed := false
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && cu != "" && id.Name == cu && (sel.Sel.Name == "CreateOrUpdate" || sel.Sel.Name == "CreateOrPatch") {
			call.Fun = ast.NewIdent(wrapperPrefix + sel.Sel.Name)
			*count++
			changed = true
			return true
		}
		least, ok := clientMethods[sel.Sel.Name]
		if !ok || len(call.Args) < least {
			return true
		}
		name := wrapperPrefix + sel.Sel.Name
		if inner, ok := sel.X.(*ast.CallExpr); ok && len(inner.Args) == 0 {
			if isel, ok := inner.Fun.(*ast.SelectorExpr); ok && isel.Sel.Name == "Status" {
				if sel.Sel.Name != "Update" && sel.Sel.Name != "Patch" {
					return true
				}
				name = wrapperPrefix + "Status" + sel.Sel.Name
			}
		}
		call.Args = append([]ast.Expr{sel.X}, call.Args...)
		call.Fun = ast.NewIdent(name)
		*count++
		changed = true
		return true
	})
	return changed
}

// renameReconcile renames reconciler's Reconcile method, for the
// generated wrapper to take its name.
func renameReconcile(f *ast.File, reconciler string) bool {
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "Reconcile" || fn.Recv == nil || len(fn.Recv.List) != 1 {
			continue
		}
		t := fn.Recv.List[0].Type
		if star, ok := t.(*ast.StarExpr); ok {
			t = star.X
		}
		if id, ok := t.(*ast.Ident); ok && id.Name == reconciler {
			fn.Name = ast.NewIdent(originalReconcile)
			return true
		}
	}
	return false
}
