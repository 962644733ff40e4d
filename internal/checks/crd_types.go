package checks

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/report"
)

type crdTypesParams struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// File is the Go file (relative to the project) declaring the types.
	File string `json:"file"`
	// Types maps a top-level field (spec, status) to its Go struct type.
	Types map[string]string `json:"types"`
	// CRDFile, when set, is the generated CRD in the project (relative
	// path) to compare instead of the installed one: make manifests was
	// run after the last change of the types.
	CRDFile string `json:"crdFile,omitempty"`
}

func (p *crdTypesParams) Validate() error {
	if p.Name == "" || p.Version == "" || p.File == "" || len(p.Types) == 0 {
		return errors.New("needs name, version, file and types")
	}
	return nil
}

func runCRDMatchesTypes(ctx context.Context, c *Context, p *crdTypesParams) Outcome {
	if c.ProjectDir() == "" {
		return skip("no project directory to compare the CRD with (pass --project)")
	}
	what := "the installed CRD " + p.Name
	var crd *apiextensionsv1.CustomResourceDefinition
	if p.CRDFile != "" {
		what = p.CRDFile
		raw, err := os.ReadFile(filepath.Join(c.ProjectDir(), filepath.FromSlash(p.CRDFile)))
		if err != nil {
			return fail("%s is missing: run make manifests", p.CRDFile)
		}
		crd = &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil || crd.Kind != "CustomResourceDefinition" {
			return fail("%s is no CustomResourceDefinition: run make manifests", p.CRDFile)
		}
	} else {
		installed, _, out, ok := getCRD(ctx, c, p.Name)
		if !ok {
			return out
		}
		crd = installed
	}
	v := crdVersion(crd, p.Version)
	if v == nil || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return fail("%s has no schema for version %s", what, p.Version)
	}
	path := filepath.Join(c.ProjectDir(), filepath.FromSlash(p.File))
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return fail("cannot parse %s: %v", p.File, oneLine(err))
	}
	var missing, checked []string
	tops := make([]string, 0, len(p.Types))
	for top := range p.Types {
		tops = append(tops, top)
	}
	sort.Strings(tops)
	for _, top := range tops {
		typeName := p.Types[top]
		fields, ok := structJSONFields(f, typeName)
		if !ok {
			missing = append(missing, fmt.Sprintf("%s declares no struct %s", p.File, typeName))
			continue
		}
		for _, name := range fields {
			if node, _ := schemaAt(v.Schema.OpenAPIV3Schema, top+"."+name); node == nil {
				missing = append(missing, top+"."+name)
			} else {
				checked = append(checked, top+"."+name)
			}
		}
	}
	if len(missing) == 0 {
		return pass("%s has every field of %s (%d fields)", what, p.File, len(checked))
	}
	return Outcome{Status: report.Fail,
		Message:  fmt.Sprintf("%s is older than %s: it lacks %s", what, p.File, strings.Join(missing, ", ")),
		Expected: "every json field of the Go types in the CRD schema",
		Observed: "missing: " + strings.Join(missing, ", ")}
}

// structJSONFields lists the json names of a struct's fields (embedded and
// "-" fields skipped).
func structJSONFields(f *ast.File, typeName string) ([]string, bool) {
	var out []string
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typeName {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		found = true
		for _, field := range st.Fields.List {
			if len(field.Names) == 0 || field.Tag == nil {
				continue
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				continue
			}
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			out = append(out, name)
		}
		return false
	})
	return out, found
}
