// Package layout holds tests of the repository's shape rather than of
// behaviour.
package layout

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxLines is the size past which a file has more than one concern and
// should be split by it (see docs/architecture.md).
const maxLines = 500

// labctl's own Go code and the reference operators' stay in files of at
// most maxLines lines; tests and generated files are exempt. (Splitting a
// reference file means re-cutting the honesty suite's patches that touch
// it: they are diffs against its files.)
func TestNoLongFiles(t *testing.T) {
	for _, dir := range []string{"cmd", "internal", "hack", "test", "operator", "hello-world-operator"} {
		root := filepath.Join("..", "..", dir)
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, raw, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				return err
			}
			if ast.IsGenerated(f) {
				return nil
			}
			n := bytes.Count(raw, []byte("\n"))
			rel, _ := filepath.Rel(filepath.Join("..", ".."), path)
			assert.LessOrEqual(t, n, maxLines, "%s has %d lines: split it by concern", rel, n)
			return nil
		})
		require.NoError(t, err)
	}
}
