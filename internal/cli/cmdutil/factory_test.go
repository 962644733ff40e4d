package cmdutil

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/labs"
)

// A command reads the catalogue from the factory: the embedded labs, or
// another directory of labs (as a test or a course fork gives), once.
func TestFactoryLabs(t *testing.T) {
	embedded, err := (&Factory{}).Labs()
	require.NoError(t, err)
	_, err = labs.FindLab(embedded, "8.2")
	assert.NoError(t, err)

	f := &Factory{LabFS: os.DirFS("../../../testdata/fixture-lab/labs")}
	first, err := f.Labs()
	require.NoError(t, err)
	assert.Equal(t, []string{"lab-0.1"}, labs.IDs(first))
	again, _ := f.Labs()
	assert.Same(t, &first[0], &again[0], "read once per command")
}
