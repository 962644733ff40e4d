package solution

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/userr"
)

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	s, out, errOut := iostreams.Test(false)
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, nil)
	cmd.SetArgs(append(args, "--lang", "en"))
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestShow(t *testing.T) {
	out, _, err := run(t, "lab-3.4", "--task", "2.1")
	require.NoError(t, err)
	assert.Contains(t, out, "Task 2.1 Patch the StatefulSet's replicas with a merge patch")
	assert.Contains(t, out, "func (r *DatabaseReconciler) patchStatefulSetReplicas(")
	assert.Contains(t, out, "client.MergeFrom(statefulSet.DeepCopy())")
	assert.NotContains(t, out, "func (r *DatabaseReconciler) listDatabasesByLabel(")

	_, _, err = run(t, "lab-3.4", "--task", "9.9")
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
}

func TestApply(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "PROJECT"), []byte("projectName: postgres-operator\n"), 0o644))
	out, _, err := run(t, "lab-8.2", "--task", "1.2", "--apply", dir)
	require.NoError(t, err)
	assert.Contains(t, out, "created    api/v1/backup_types.go")
	want, err := fs.ReadFile(reference.Source, "api/v1/backup_types.go")
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, "api", "v1", "backup_types.go"))
	require.NoError(t, err)
	assert.Equal(t, want, got)

	out, _, err = run(t, "lab-8.2", "--task", "1.2", "--apply", dir)
	require.NoError(t, err)
	assert.Contains(t, out, "unchanged  api/v1/backup_types.go")

	mine := []byte("package v1 // my own work\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "api", "v1", "backup_types.go"), mine, 0o644))
	_, _, err = run(t, "lab-8.2", "--task", "1.2,2.1", "--apply", dir)
	require.Error(t, err)
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	assert.Contains(t, userr.Message(err), "api/v1/backup_types.go")
	got, _ = os.ReadFile(filepath.Join(dir, "api", "v1", "backup_types.go"))
	assert.Equal(t, mine, got, "a changed file is left alone")
	_, err = os.Stat(filepath.Join(dir, "api", "v1", "database_types.go"))
	assert.True(t, os.IsNotExist(err), "nothing is written when something would be overwritten")

	out, _, err = run(t, "lab-8.2", "--task", "1.2,2.1", "--apply", dir, "--force")
	require.NoError(t, err)
	assert.Contains(t, out, "overwrote  api/v1/backup_types.go")
	assert.Contains(t, out, "created    api/v1/database_types.go")
}

// Each lab's solution comes from its own project: lab 2.4's from the Hello
// World operator, lab 1.4's CRD file into a directory that is no
// kubebuilder project (and needs none).
func TestSolutionsOfOtherProjects(t *testing.T) {
	out, _, err := run(t, "lab-2.4", "--task", "5.3")
	require.NoError(t, err)
	assert.Contains(t, out, "hello-world-operator/internal/controller/helloworld_controller.go")
	assert.Contains(t, out, "ctrl.SetControllerReference(hw, cm, r.Scheme)")

	dir := t.TempDir()
	out, errOut, err := run(t, "lab-1.4", "--apply", dir)
	require.NoError(t, err)
	assert.Contains(t, out, "created    website-crd.yaml")
	assert.NotContains(t, errOut, "no PROJECT file")
	assert.Contains(t, errOut, "labctl verify lab-1.4 --project "+dir)
	got, err := os.ReadFile(filepath.Join(dir, "website-crd.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(got), "shortNames:\n    - ws")
}
