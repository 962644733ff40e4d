package cmdutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/local"
)

// ClusterName is the cluster a command acts on: --name when given, else
// the cluster of the current kubeconfig context when it is one labctl
// made (labctl-NAME, as `labctl up --name NAME` leaves it), else name (the
// flag's default). kubectl follows the current context too, so after
// `labctl up --name tty` plain `labctl verify lab-8.2` checks tty.
func ClusterName(cmd *cobra.Command, name string) string {
	if f := cmd.Flags().Lookup("name"); f == nil || f.Changed {
		return name
	}
	// An unreadable kubeconfig is no reason to fail here; the default
	// name still works, and commands that need the file say what is wrong.
	raw, err := clientcmd.NewDefaultClientConfigLoadingRules().Load()
	if err != nil || raw == nil {
		return name
	}
	if n, ok := strings.CutPrefix(raw.CurrentContext, local.ContextName("")); ok && cluster.ValidateName(n) == nil {
		return n
	}
	return name
}

// Invocation is how the user runs labctl, for hints that name a command
// that will work as typed: "labctl" when it is on PATH, "go run
// ./cmd/labctl" under `go run`, else the binary's path.
func Invocation() string {
	if _, err := exec.LookPath("labctl"); err == nil {
		return "labctl"
	}
	exe, err := os.Executable()
	if err != nil {
		return "labctl"
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/labctl"
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			return "./" + rel
		}
	}
	return exe
}
