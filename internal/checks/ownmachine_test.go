package checks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/labs"
	labsfs "github.com/labctl/labctl/labs"
)

// A grader's machine is not the student's: lab 6.1's tool tasks are not
// graded, and their points are not in the total; every other lab grades
// as it verifies.
func TestForGradingLeavesOutTheStudentsMachine(t *testing.T) {
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	for _, l := range all {
		g := ForGrading(l)
		require.NoError(t, Validate(g), l.ID)
		if l.ID != "lab-6.1" {
			assert.Same(t, l, g, "%s has no task of the student's machine", l.ID)
			continue
		}
		assert.Equal(t, []string{"1.1", "1.2", "1.3"}, MachineTasks(l))
		var ids []string
		for _, task := range g.Tasks {
			ids = append(ids, task.ID)
		}
		assert.Equal(t, []string{"4.1", "4.2"}, ids)
		assert.Equal(t, 70, g.MaxPoints())
		assert.Equal(t, 100, l.MaxPoints(), "the lab itself is unchanged")
		assert.Equal(t, 2, CountChecks(g, nil), "no tool check is run")
	}
}
