package solution

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/userr"
	labsfs "github.com/labctl/labctl/labs"
	"github.com/labctl/labctl/solutions"
)

// Every line of every files.txt names a task of its lab and code that
// exists in the embedded reference project of that lab.
func TestMappingsMatchTheReference(t *testing.T) {
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	dirs, err := fs.Glob(solutions.FS, "lab-*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, d := range dirs {
		lab, ok := labs.Find(all, d)
		require.True(t, ok, "solutions/%s has no lab definition", d)
		raw, err := fs.ReadFile(solutions.FS, d+"/files.txt")
		require.NoError(t, err)
		entries, err := ParseFiles(raw)
		require.NoError(t, err)
		ref, err := reference.Lookup(lab.Project)
		require.NoError(t, err)
		for _, e := range entries {
			_, ok := lab.Task(e.Task)
			assert.True(t, ok, "%s/files.txt: %s has no task %s", d, lab.ID, e.Task)
			src, err := fs.ReadFile(ref.Source, e.File)
			require.NoError(t, err, "%s/files.txt: %s", d, e.File)
			snippets, err := Extract(e.File, src, e.Names)
			require.NoError(t, err, "%s/files.txt", d)
			assert.GreaterOrEqual(t, len(snippets), max(1, len(e.Names)))
		}
	}
}

func TestParseFiles(t *testing.T) {
	e, err := ParseFiles([]byte("# comment\n\n1.1 a/b.go F G\n2.1 c.yaml\n"))
	require.NoError(t, err)
	assert.Equal(t, []Entry{{Task: "1.1", File: "a/b.go", Names: []string{"F", "G"}}, {Task: "2.1", File: "c.yaml", Names: []string{}}}, e)
	_, err = ParseFiles([]byte("1.1\n"))
	assert.Error(t, err)
	_, err = ParseFiles([]byte("1.1 ../../etc/passwd\n"))
	assert.Error(t, err)
}

func TestEntries(t *testing.T) {
	all, err := Entries(solutions.FS, "lab-8.2", nil)
	require.NoError(t, err)
	some, err := Entries(solutions.FS, "lab-8.2", []string{all[0].Task})
	require.NoError(t, err)
	assert.NotEmpty(t, some)
	for _, e := range some {
		assert.Equal(t, all[0].Task, e.Task)
	}
	_, err = Entries(solutions.FS, "lab-8.2", []string{"9.9"})
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	_, err = Entries(solutions.FS, "lab-0.0", nil)
	assert.ErrorContains(t, err, "no reference solution for lab-0.0")
}
