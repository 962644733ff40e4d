package up

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/userr"
)

func TestProjectToDeployFollowsTheLab(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	s, _, errOut := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s}

	dir, deploy, err := (&Options{f: f, Project: "/some/project"}).projectToDeploy()
	require.NoError(t, err)
	assert.True(t, deploy)
	assert.Equal(t, "/some/project", dir)

	dir, deploy, err = (&Options{f: f, Lab: "2.4"}).projectToDeploy()
	require.NoError(t, err)
	assert.True(t, deploy)
	raw, err := os.ReadFile(filepath.Join(dir, "PROJECT"))
	require.NoError(t, err)
	assert.Contains(t, string(raw), "projectName: hello-world-operator")

	dir, deploy, err = (&Options{f: f, Lab: "lab-1.4"}).projectToDeploy()
	require.NoError(t, err)
	assert.False(t, deploy)
	assert.Empty(t, dir)
	assert.Contains(t, errOut.String(), "lab-1.4 needs no operator")

	dir, deploy, err = (&Options{f: f, Lab: "6.2"}).projectToDeploy()
	require.NoError(t, err)
	assert.False(t, deploy, "lab 6.2 runs the student's tests, not the operator")
	assert.Empty(t, dir)
	assert.Contains(t, errOut.String(), "lab-6.2 needs no operator")

	_, _, err = (&Options{f: f, Lab: "9.9"}).projectToDeploy()
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
}

func TestLabAndProjectExclude(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, nil)
	cmd.SetArgs([]string{"--lab", "2.4", "--project", "."})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	assert.Error(t, cmd.Execute())
}
