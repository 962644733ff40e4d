package labs_test

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/jsonschema"
	"github.com/labctl/labctl/internal/labs"
	labsfs "github.com/labctl/labctl/labs"
)

// The schema file is generated from the types: a field, marker or doc
// comment changed without `make generate` leaves editors and the loader
// with the old format.
func TestSchemaFileIsUpToDate(t *testing.T) {
	want, err := labs.GenerateSchema(".")
	require.NoError(t, err)
	if !bytes.Equal(want, labsfs.Schema) {
		t.Fatalf("%s differs from what internal/labs' types say: run `make generate` and commit it", labs.SchemaFile)
	}
}

// validLabFiles are the lab files that must load: every embedded lab and
// the fixture lab, by their path from the repository's root.
func validLabFiles(t *testing.T) map[string][]byte {
	files := map[string][]byte{}
	names, err := fs.Glob(labsfs.FS, "*.yaml")
	require.NoError(t, err)
	for _, n := range names {
		raw, err := fs.ReadFile(labsfs.FS, n)
		require.NoError(t, err)
		files[path.Join("labs", n)] = raw
	}
	fixtures, err := filepath.Glob("../../testdata/fixture-lab/labs/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, fixtures)
	for _, n := range fixtures {
		raw, err := os.ReadFile(n)
		require.NoError(t, err)
		files[strings.TrimPrefix(filepath.ToSlash(n), "../../")] = raw
	}
	return files
}

// Every lab file validates against the schema generated from the types
// now (not only the embedded one), and names it for editors on its first
// line, by a path that resolves from the file.
func TestLabFilesMatchTheSchema(t *testing.T) {
	schema, err := labs.GenerateSchema(".")
	require.NoError(t, err)
	v, err := jsonschema.Compile(schema)
	require.NoError(t, err)
	for name, raw := range validLabFiles(t) {
		t.Run(name, func(t *testing.T) {
			doc, err := yaml.YAMLToJSON(raw)
			require.NoError(t, err)
			var tree any
			require.NoError(t, yaml.Unmarshal(doc, &tree))
			assert.Empty(t, v.Validate(tree))

			first, _, _ := strings.Cut(string(raw), "\n")
			ref, ok := strings.CutPrefix(first, "# yaml-language-server: $schema=")
			require.True(t, ok, "the first line is the editor's modeline, # yaml-language-server: $schema=<path to %s>", labs.SchemaFile)
			assert.Equal(t, labs.SchemaFile, path.Join(path.Dir(name), ref), "the modeline's path resolves from the file")
		})
	}
}

func TestAPIVersionIsRequired(t *testing.T) {
	cases := map[string]struct{ from, to, want string }{
		"missing": {"apiVersion: labctl.dev/v1alpha1\n", "",
			"x.yaml: no apiVersion: a lab file starts with apiVersion: labctl.dev/v1alpha1 and kind: Lab"},
		"newer": {"apiVersion: labctl.dev/v1alpha1", "apiVersion: labctl.dev/v2",
			`x.yaml: apiVersion "labctl.dev/v2" unknown; this labctl reads labctl.dev/v1alpha1 — upgrade labctl, or write the lab for labctl.dev/v1alpha1`},
		"other kind": {"kind: Lab", "kind: Test", `x.yaml: kind "Test": a lab file has kind: Lab`},
		"no kind":    {"kind: Lab\n", "", "x.yaml: no kind: a lab file has kind: Lab after its apiVersion"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(minimal, c.from, c.to, 1)
			require.NotEqual(t, minimal, src, "test case does not change the input")
			_, err := labs.Parse("x.yaml", []byte(src))
			require.Error(t, err)
			assert.Equal(t, c.want, err.Error())
		})
	}
}
