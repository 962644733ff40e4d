package checks

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/report"
)

// Lab 6.1 task 4.2: coverage.out is what go test -coverprofile wrote for
// the controller package, whatever else it also covers.
func TestCoverageProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	dir := t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	write("go.mod", "module github.com/example/postgres-operator\n\ngo 1.26\n")
	write("internal/controller/c.go", "package controller\n\nfunc Phase(ready bool) string {\n\tif ready {\n\t\treturn \"Ready\"\n\t}\n\treturn \"Pending\"\n}\n")
	write("internal/controller/c_test.go", "package controller\n\nimport \"testing\"\n\nfunc TestPhase(t *testing.T) {\n\tif Phase(true) != \"Ready\" {\n\t\tt.Fatal()\n\t}\n}\n")
	write("api/v1/types.go", "package v1\n\nfunc Kind() string { return \"Database\" }\n")
	write("api/v1/types_test.go", "package v1\n\nimport \"testing\"\n\nfunc TestKind(t *testing.T) { _ = Kind() }\n")
	profile := func(name string, pkgs ...string) []byte {
		t.Helper()
		cmd := exec.Command("go", append([]string{"test", "-count=1", "-coverprofile=" + name}, pkgs...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		raw, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return raw
	}
	controller := profile("coverage.out", "./internal/controller/...")
	everything := profile("all.out", "./...")
	api := profile("api.out", "./api/...")
	check := func(t *testing.T, body []byte) Outcome {
		t.Helper()
		if body == nil {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "coverage.out")))
		} else {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "coverage.out"), body, 0o644))
		}
		return runCheck(t, projectContext(dir), "coverage-profile", `{}`)
	}
	for name, body := range map[string][]byte{"the lab's command": controller, "go test ./...": everything} {
		t.Run(name, func(t *testing.T) {
			out := check(t, body)
			assert.Equal(t, report.Pass, out.Status, out.Message)
			assert.Contains(t, out.Message, "github.com/example/postgres-operator/internal/controller: 66.7% of its statements (2 of 3)")
		})
	}
	t.Run("a symlink to a profile elsewhere", func(t *testing.T) {
		// When grading, where it points may be outside the submission.
		outside := filepath.Join(t.TempDir(), "profile")
		require.NoError(t, os.WriteFile(outside, controller, 0o644))
		link := filepath.Join(dir, "coverage.out")
		require.NoError(t, os.RemoveAll(link))
		require.NoError(t, os.Symlink(outside, link))
		out := runCheck(t, projectContext(dir), "coverage-profile", `{}`)
		assert.Equal(t, report.Fail, out.Status, out.Message)
		assert.Contains(t, out.Message, "coverage.out is not a regular file")
		require.NoError(t, os.Remove(link))
	})
	for name, tc := range map[string]struct {
		body []byte
		says string
	}{
		"another package's profile": {api, "has no statement of github.com/example/postgres-operator/internal/controller (it covers github.com/example/postgres-operator/api/v1)"},
		"the HTML report instead":   {[]byte("<!DOCTYPE html>\n<html>\n"), "is not a Go cover profile"},
		"go test's output instead":  {[]byte("ok  \tgithub.com/example/postgres-operator/internal/controller\t0.01s\tcoverage: 66.7% of statements\n"), "is not a Go cover profile"},
		"an empty file":             {[]byte{}, "is not a Go cover profile"},
		"no file":                   {nil, "there is no coverage.out"},
	} {
		t.Run(name, func(t *testing.T) {
			out := check(t, tc.body)
			assert.Equal(t, report.Fail, out.Status, out.Message)
			assert.Contains(t, out.Message, tc.says)
		})
	}
}
