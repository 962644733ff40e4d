package labs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNextFollowsTheProjectInCourseOrder(t *testing.T) {
	all := []*Lab{{ID: "lab-2.4", Project: "hello"}, {ID: "lab-3.2"}, {ID: "lab-3.4", Project: "postgres"}, {ID: "lab-8.2"}}
	assert.Equal(t, "lab-3.2", Next(all, "", nil).ID, "a new user starts at the first lab of the operator")
	assert.Equal(t, "lab-3.4", Next(all, "postgres", []string{"lab-3.2"}).ID)
	assert.Equal(t, "lab-8.2", Next(all, "", []string{"lab-3.2", "lab-3.4", "lab-8.2"}).ID, "all passed: the last one")
	assert.Equal(t, "lab-2.4", Next(all, "hello", nil).ID)
	assert.Nil(t, Next(all, "website", nil))
}

func TestNextOverTheRealLabs(t *testing.T) {
	all, err := Load(os.DirFS("../../labs"))
	require.NoError(t, err)
	next := Next(all, "", nil)
	require.NotNil(t, next)
	assert.Equal(t, "", canonicalProject(next.Project))
}

func TestPassedRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	p := PassedIn(dir)
	ids, err := p.List()
	require.NoError(t, err)
	assert.Empty(t, ids)
	require.NoError(t, p.Add("lab-8.2"))
	require.NoError(t, p.Add("lab-3.4"))
	require.NoError(t, p.Add("lab-8.2"))
	ids, err = p.List()
	require.NoError(t, err)
	assert.Equal(t, []string{"lab-3.4", "lab-8.2"}, ids)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "passed-labs.json"), []byte("{"), 0o600))
	_, err = p.List()
	assert.Error(t, err, "a corrupt record is reported")
	require.NoError(t, p.Add("lab-3.2"), "and rebuilt by the next pass")
	ids, err = p.List()
	require.NoError(t, err)
	assert.Equal(t, []string{"lab-3.2"}, ids)
}
