package labs_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/labs"
	labsfs "github.com/labctl/labctl/labs"
)

// README.md's "Labs" table is what users read first: it must list every
// lab labctl has, with its module, title, project and number of tasks.
func TestREADMELabsMatchTheLabs(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(raw), "## Labs\n")
	require.True(t, ok, "README has a Labs section")
	section, _, _ = strings.Cut(section, "\n## ")
	var got []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| ") && strings.Contains(line, "| lab-") {
			got = append(got, line)
		}
	}
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	var want []string
	for _, l := range all {
		project := l.Project
		if project == "" {
			project = "postgres"
		}
		want = append(want, fmt.Sprintf("| %d | %s | %s | %s | %d |", l.Module, l.ID, l.Title.EN, project, len(l.Tasks)))
	}
	assert.Equal(t, want, got, "README's Labs table and labs/*.yaml differ")
}
