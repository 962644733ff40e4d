package labs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/userr"
)

func run(t *testing.T, tty bool, args ...string) (string, error) {
	t.Helper()
	s, out, _ := iostreams.Test(tty)
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, nil)
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	return out.String(), err
}

func TestList(t *testing.T) {
	out, err := run(t, false, "--lang", "en")
	require.NoError(t, err)
	assert.Equal(t, "1\tlab-1.4\tCreating Your First CRD\twebsite\t11\t100\n"+
		"2\tlab-2.4\tBuilding Hello World Operator\thello\t11\t100\n"+
		"3\tlab-3.1\tExploring Controller Runtime\thello\t5\t100\n"+
		"3\tlab-3.2\tAPI Design for Database Operator\tpostgres\t11\t100\n"+
		"3\tlab-3.3\tBuilding PostgreSQL Operator\tpostgres\t9\t100\n"+
		"3\tlab-3.4\tAdvanced Client Operations\tpostgres\t13\t100\n"+
		"4\tlab-4.1\tImplementing Status Conditions\tpostgres\t4\t100\n"+
		"4\tlab-4.2\tImplementing Finalizers\tpostgres\t4\t100\n"+
		"4\tlab-4.3\tSetting Up Watches and Indexes\tpostgres\t6\t100\n"+
		"4\tlab-4.4\tMulti-Phase Reconciliation\tpostgres\t4\t100\n"+
		"6\tlab-6.1\tSetting Up Testing Environment\tpostgres\t5\t100\n"+
		"6\tlab-6.2\tWriting Unit Tests\tpostgres\t6\t100\n6\tlab-6.3\tCreating Integration Tests\tpostgres\t4\t100\n"+
		"6\tlab-6.4\tAdding Observability\tpostgres\t6\t100\n"+
		"8\tlab-8.2\tComposing Operators\tpostgres\t13\t100\n", out)
	out, err = run(t, true, "--lang", "ru")
	require.NoError(t, err)
	assert.Contains(t, out, "Композиция операторов")
	assert.Contains(t, out, "LAB")
	// On a terminal each module is named once, above its labs.
	var threes int
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "3 ") {
			threes++
		}
	}
	assert.Equal(t, 1, threes, out)
}

func TestShow(t *testing.T) {
	out, err := run(t, false, "show", "8.2", "--lang", "en")
	require.NoError(t, err)
	assert.Contains(t, out, "3.2\t10\tThe Database reads the condition, not the phase\t3\n")
	assert.Contains(t, out, "cleanup\t5\t")
	_, err = run(t, false, "show", "lab-9.9")
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
}

func TestRunFReceivesTheLab(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	var got *Options
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"show", "3.4", "--lang", "ru"})
	require.NoError(t, cmd.Execute())
	assert.Equal(t, "3.4", got.Lab)
	assert.Equal(t, "ru", got.Lang)
}

func TestStructuredOutput(t *testing.T) {
	out, err := run(t, false, "-o", "json", "--lang", "en")
	require.NoError(t, err)
	var list []LabSummary
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	require.NotEmpty(t, list)
	assert.Equal(t, LabSummary{Module: 1, ID: "lab-1.4", Title: "Creating Your First CRD", Project: "website", Tasks: 11, Points: 100}, list[0])

	out, err = run(t, false, "show", "8.2", "-o", "yaml", "--lang", "en")
	require.NoError(t, err)
	var d LabDetail
	require.NoError(t, yaml.Unmarshal([]byte(out), &d), out)
	assert.Equal(t, "lab-8.2", d.ID)
	total := 0
	for _, task := range d.TaskList {
		total += task.Points
		assert.NotEmpty(t, task.Checks, "task %s is judged by some check", task.ID)
	}
	assert.Equal(t, d.Points, total, "the tasks' points add up to the lab's")

	_, err = run(t, false, "-o", "xml")
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
}
