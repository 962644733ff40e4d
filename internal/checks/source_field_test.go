package checks

import (
	"go/ast"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/report"
)

// The index lab 4.3 asks for is judged by what it does: the same key
// spelled as a constant, a variable, a helper's result or a concatenation
// is the same key, and any name for an index that extracts spec.image is
// that index. Only an index that extracts something else, or sits on
// another kind, or is never queried, fails.
func TestFieldIndexJudgesMeaning(t *testing.T) {
	withKey := func(decl, key string) string {
		code := strings.ReplaceAll(watchSetup, `"spec.image"`, key)
		return code + decl
	}
	passes := map[string]string{
		"a package variable":      withKey("\nvar imageKey = \"spec.image\"\n", "imageKey"),
		"a typed constant":        withKey("\ntype IndexKey string\n\nconst imageKey IndexKey = \"spec.image\"\n", "string(imageKey)"),
		"a concatenation":         withKey("\nconst specPrefix = \"spec.\"\n\nconst imageKey = specPrefix + \"image\"\n", "imageKey"),
		"a helper's result":       withKey("\nfunc imageIndexKey() string { return \"spec.\" + \"image\" }\n", "imageIndexKey()"),
		"a method's result":       withKey("\nfunc (r *DatabaseReconciler) imageKey() string { return \"spec.image\" }\n", "r.imageKey()"),
		"another name, same data": withKey("", `"image"`),
		"a local variable": strings.Replace(strings.Replace(watchSetup,
			`"spec.image", func(`, `key, func(`, 1),
			"func (r *DatabaseReconciler) SetupWithManager(mgr ctrl.Manager) error {\n", "func (r *DatabaseReconciler) SetupWithManager(mgr ctrl.Manager) error {\n\tkey := \"spec.image\"\n", 1),
		"an extractor method": strings.Replace(watchSetup, "func(obj client.Object) []string { return []string{obj.(*databasev1.Database).Spec.Image} }", "r.imageOf", 1) +
			"\nfunc (r *DatabaseReconciler) imageOf(obj client.Object) []string {\n\tdb := obj.(*databasev1.Database)\n\treturn []string{db.Spec.Image}\n}\n",
	}
	for name, code := range passes {
		t.Run(name, func(t *testing.T) {
			out := runCheck(t, writeProject(t, code), "field-index", imageIndex)
			assert.Equal(t, report.Pass, out.Status, out.Message)
		})
	}
	t.Run("a constant of another package", func(t *testing.T) {
		code := strings.Replace(watchSetup, "import (\n", "import (\n\t\"x/internal/keys\"\n", 1)
		c := writeProject(t, strings.ReplaceAll(code, `"spec.image"`, "keys.Image"))
		dir := filepath.Join(c.ProjectDir(), "internal", "keys")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "keys.go"), []byte("package keys\n\nconst Image = \"spec.image\"\n"), 0o644))
		out := runCheck(t, c, "field-index", imageIndex)
		assert.Equal(t, report.Pass, out.Status, out.Message)
	})

	fails := map[string]struct{ code, says string }{
		"the extractor returns another field": {
			strings.Replace(watchSetup, "Spec.Image}", "Spec.DatabaseName}", 1), "never reads spec.image"},
		"the index is on another kind": {
			strings.Replace(strings.Replace(watchSetup, "&databasev1.Database{}, \"spec.image\"", "&corev1.Pod{}, \"spec.image\"", 1),
				"obj.(*databasev1.Database).Spec.Image", "obj.(*corev1.Pod).Spec.Containers[0].Image", 1), "of Pod, not of Database"},
		// The query and the index must meet: a query under another
		// name than the index's has no index.
		"the query uses another name than the index": {
			strings.Replace(watchSetup, `client.MatchingFields{"spec.image": image}`, `client.MatchingFields{"image": image}`, 1), "no List queries it"},
	}
	for name, tc := range fails {
		t.Run(name, func(t *testing.T) {
			out := runCheck(t, writeProject(t, tc.code), "field-index", imageIndex)
			assert.Equal(t, report.Fail, out.Status, out.Message)
			assert.Contains(t, out.Message, tc.says)
		})
	}
}

func TestStringValue(t *testing.T) {
	c := writeProject(t, `package controller

const a = "x"
const b = a + ".y"

var c = b

var d = "changes"

func set() { d = "other" }

func k() string { return c }

func f(p string) {
	l := k()
	var m = "m"
	n := "n"
	n = "n2"
	_ = []any{a, b, c, d, l, m, n, p, k(), string(b), "q" + p}
}
`)
	proj, err := loadGoProject(c.ProjectDir())
	require.NoError(t, err)
	var fn *goFunc
	for _, g := range proj.funcs {
		if g.name == "f" {
			fn = g
		}
	}
	require.NotNil(t, fn)
	want := []struct {
		v  string
		ok bool
	}{{"x", true}, {"x.y", true}, {"x.y", true}, {"", false}, {"x.y", true}, {"m", true}, {"", false}, {"", false}, {"x.y", true}, {"x.y", true}, {"", false}}
	var got []struct {
		v  string
		ok bool
	}
	body := fn.decl.Body.List
	lit := body[len(body)-1].(*ast.AssignStmt).Rhs[0].(*ast.CompositeLit)
	for _, e := range lit.Elts {
		v, ok := proj.stringValue(e, fn)
		got = append(got, struct {
			v  string
			ok bool
		}{v, ok})
	}
	assert.Equal(t, want, got)
}
