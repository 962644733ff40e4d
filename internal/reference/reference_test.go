package reference_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/reference/archive"
	labsfs "github.com/labctl/labctl/labs"
)

// Every lab names a project labctl has, and each project is what it says:
// the operators are kubebuilder projects, lab 1.4's CRD is a file.
func TestEveryLabHasItsProject(t *testing.T) {
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	for _, l := range all {
		ref, err := reference.Lookup(l.Project)
		require.NoError(t, err, l.ID)
		marker := "PROJECT"
		if !ref.Operator {
			marker = "website-crd.yaml"
		}
		_, err = fs.Stat(ref.Source, marker)
		assert.NoError(t, err, "%s: project %s has no %s", l.ID, ref.Name, marker)
	}
	def, err := reference.Lookup("")
	require.NoError(t, err)
	assert.Equal(t, reference.Postgres, def.Name)
	_, err = reference.Lookup("nope")
	assert.ErrorContains(t, err, "postgres, hello, website")
}

func TestDirExtractsEachProjectOnce(t *testing.T) {
	cache := t.TempDir()
	hello, err := reference.Lookup(reference.Hello)
	require.NoError(t, err)
	dir, err := hello.Dir(cache)
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(dir, "PROJECT"))
	require.NoError(t, err)
	assert.Contains(t, string(raw), "repo: github.com/example/hello-world-operator")
	again, err := hello.Dir(cache)
	require.NoError(t, err)
	assert.Equal(t, dir, again)
	pg, err := reference.Dir(cache)
	require.NoError(t, err)
	assert.NotEqual(t, dir, pg, "each project has its own directory")
}

func TestByProjectName(t *testing.T) {
	p, ok := reference.ByProjectName("hello-world-operator")
	require.True(t, ok)
	assert.Equal(t, reference.Hello, p.Name)
	p, ok = reference.ByProjectName("postgres-operator")
	require.True(t, ok)
	assert.Equal(t, reference.Postgres, p.Name)
	_, ok = reference.ByProjectName("")
	assert.False(t, ok, "the website project has no projectName")
	_, ok = reference.ByProjectName("my-operator")
	assert.False(t, ok)
}

// The operators' `make test` finds its envtest binaries the same way in
// both projects (and in their embedded copies a student extracts): one
// Makefile and one finder script, kept identical.
func TestOperatorsShareTheirTestTooling(t *testing.T) {
	pg, err := reference.Lookup(reference.Postgres)
	require.NoError(t, err)
	hello, err := reference.Lookup(reference.Hello)
	require.NoError(t, err)
	for _, name := range []string{"Makefile", "hack/envtest-assets.sh"} {
		a, err := fs.ReadFile(pg.Source, name)
		require.NoError(t, err, "%s is embedded", name)
		b, err := fs.ReadFile(hello.Source, name)
		require.NoError(t, err, "%s is embedded", name)
		assert.Equal(t, string(a), string(b), "%s differs between %s and %s", name, pg.RepoDir, hello.RepoDir)
	}
}

// The embedded operators are the projects in this repository: an edit of
// operator/ or hello-world-operator/ without `make generate` fails here.
func TestArchivesMatchTheProjects(t *testing.T) {
	for _, name := range []string{reference.Postgres, reference.Hello} {
		ref, err := reference.Lookup(name)
		require.NoError(t, err)
		want, err := archive.Read(filepath.Join("..", "..", ref.RepoDir))
		require.NoError(t, err)
		got, err := archive.ReadFS(ref.Source)
		require.NoError(t, err)
		assert.NotEmpty(t, got)
		if diff := archive.Diff(want, got); len(diff) > 0 {
			t.Errorf("the embedded %s is out of date with %s/ (%s): run `make generate` (go generate ./internal/reference) and commit the archive",
				ref.Name, ref.RepoDir, strings.Join(diff, ", "))
		}
	}
}
