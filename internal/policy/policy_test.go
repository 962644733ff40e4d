package policy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/policy"
	"github.com/labctl/labctl/internal/userr"
	labsfs "github.com/labctl/labctl/labs"
)

func write(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

func lab(t *testing.T, id string) *labs.Lab {
	t.Helper()
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	l, ok := labs.Find(all, id)
	require.True(t, ok)
	return l
}

func step(l *labs.Lab, id string) *labs.Step {
	for i := range l.Scenarios {
		for j := range l.Scenarios[i].Steps {
			if l.Scenarios[i].Steps[j].ID == id {
				return &l.Scenarios[i].Steps[j]
			}
		}
	}
	return nil
}

func TestApply(t *testing.T) {
	p, err := policy.Load(write(t, `
name: strict section B
labs:
  lab-8.2:
    points: {"4.2": 15, cleanup: 0}
    steps: {pending-database-not-found: fail, backup-logged: hidden}
  lab-3.4:
    bugs: {B1: fail}
`))
	require.NoError(t, err)
	assert.Equal(t, "strict section B", p.Name)

	orig := lab(t, "lab-8.2")
	l, err := p.Apply(orig)
	require.NoError(t, err)
	task, _ := l.Task("4.2")
	assert.Equal(t, 15, task.Points)
	task, _ = l.Task("cleanup")
	assert.Equal(t, 0, task.Points)
	assert.Empty(t, step(l, "pending-database-not-found").Severity, "warn made strict")
	assert.True(t, step(l, "backup-logged").Hidden)
	// The lab itself is untouched (labs are shared by every submission).
	task, _ = orig.Task("4.2")
	assert.Equal(t, 10, task.Points)
	assert.Equal(t, "warn", step(orig, "pending-database-not-found").Severity)
	assert.False(t, step(orig, "backup-logged").Hidden)

	l34, err := p.Apply(lab(t, "lab-3.4"))
	require.NoError(t, err)
	assert.Empty(t, step(l34, "image-change-applied").Severity, "the course's bug B1 is failed under this policy")

	// A lab the policy does not mention keeps its defaults.
	none, err := policy.Load(write(t, "name: none\nlabs: {}\n"))
	require.NoError(t, err)
	same, err := none.Apply(orig)
	require.NoError(t, err)
	assert.Same(t, orig, same)
}

func TestPolicyErrorsSayWhatDoesNotFit(t *testing.T) {
	p, err := policy.Load(write(t, `
name: typos
labs:
  lab-8.2:
    points: {"9.9": 5, "4.2": -1}
    steps: {no-such-check: warn, backup-logged: lenient}
    bugs: {B99: fail}
`))
	require.NoError(t, err)
	_, err = p.Apply(lab(t, "lab-8.2"))
	require.Error(t, err)
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	for _, want := range []string{"no task 9.9", "-1 is negative", "no check no-such-check", `"lenient"`, "course bug B99"} {
		assert.Contains(t, err.Error(), want)
	}

	_, err = policy.Load(write(t, "name: x\nlabz: {}\n"))
	assert.Equal(t, userr.ExitUsage, userr.Code(err), "unknown fields are refused")
	_, err = policy.Load(write(t, "labs: {}\n"))
	assert.ErrorContains(t, err, "no name")
	_, err = policy.Load(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
}

// Lab 3.4's lookup without an index is the lab text's own bug (B3): a
// warning by default, as B1 is; a policy can make it fail.
func TestTextBugB3WarnsByDefaultAndAPolicyCanFailIt(t *testing.T) {
	l34 := lab(t, "lab-3.4")
	st := step(l34, "field-selector-indexed")
	require.NotNil(t, st)
	assert.Equal(t, "warn", st.Severity)
	assert.Equal(t, "B3", st.Bug)
	// The lookup itself, which the text asks for, still fails when missing.
	assert.Empty(t, step(l34, "field-selector-lookup").Severity)

	p, err := policy.Load(write(t, "name: strict B3\nlabs:\n  lab-3.4:\n    bugs: {B3: fail}\n"))
	require.NoError(t, err)
	strict, err := p.Apply(l34)
	require.NoError(t, err)
	assert.Empty(t, step(strict, "field-selector-indexed").Severity, "B3 is failed under this policy")
}

// B32 strikes in some runs only: its wait excuses the Backup left
// InProgress by default; `bugs: {B32: fail}` makes the wait fail as any
// other (and the steps behind it with it), leaving the lab itself as it
// was.
func TestRaceBugB32ExcusedByDefaultAndAPolicyCanFailIt(t *testing.T) {
	l82 := lab(t, "lab-8.2")
	st := step(l82, "backup-completed")
	require.NotNil(t, st)
	require.NotNil(t, st.Expect.Stuck)
	assert.Equal(t, "B32", st.Expect.Stuck.Bug)

	p, err := policy.Load(write(t, "name: strict B32\nlabs:\n  lab-8.2:\n    bugs: {B32: fail}\n"))
	require.NoError(t, err)
	strict, err := p.Apply(l82)
	require.NoError(t, err)
	assert.Nil(t, step(strict, "backup-completed").Expect.Stuck, "B32 is no longer excused")
	assert.NotNil(t, step(l82, "backup-completed").Expect.Stuck, "the lab itself is unchanged")

	p, err = policy.Load(write(t, "name: bad\nlabs:\n  lab-8.2:\n    bugs: {B32: sometimes}\n"))
	require.NoError(t, err)
	_, err = p.Apply(l82)
	assert.ErrorContains(t, err, "severity")
}
