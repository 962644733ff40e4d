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

// Lab 6.1 installs ginkgo, setup-envtest and dlv with go install; the
// check asks the tool itself. The go command stands in for them: it is a
// real tool that answers "version".
func TestTool(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	here := projectContext(t.TempDir())
	t.Run("on PATH", func(t *testing.T) {
		out := runCheck(t, here, "tool", `{"command":"go","install":"install Go"}`)
		assert.Equal(t, report.Pass, out.Status, out.Message)
		assert.Contains(t, out.Message, "go version: go version go1.")
	})
	t.Run("not installed", func(t *testing.T) {
		out := runCheck(t, here, "tool", `{"command":"labctl-no-such-tool","install":"go install example.com/tool@latest"}`)
		assert.Equal(t, report.Fail, out.Status, out.Message)
		assert.Contains(t, out.Message, "labctl-no-such-tool is not installed: go install example.com/tool@latest")
	})
	t.Run("fails to answer", func(t *testing.T) {
		out := runCheck(t, here, "tool", `{"command":"go","args":["no-such-subcommand"],"install":"install Go"}`)
		assert.Equal(t, report.Fail, out.Status, out.Message)
		assert.Contains(t, out.Message, "go no-such-subcommand fails")
	})
	t.Run("installed by go install, not on PATH", func(t *testing.T) {
		gobin := t.TempDir()
		require.NoError(t, os.Symlink(goBin, filepath.Join(gobin, "go")))
		t.Setenv("PATH", t.TempDir())
		t.Setenv("GOBIN", gobin)
		out := runCheck(t, here, "tool", `{"command":"go","install":"install Go"}`)
		assert.Equal(t, report.Warn, out.Status, out.Message)
		assert.Contains(t, out.Message, "is not on PATH")
		assert.Contains(t, out.Message, "add "+gobin+" to PATH")
	})
	t.Run("grading", func(t *testing.T) {
		c := &Context{run: &run{o: Options{Grading: true}}}
		out := runCheck(t, c, "tool", `{"command":"go","install":"install Go"}`)
		assert.Equal(t, report.Skipped, out.Status, out.Message)
	})
}
