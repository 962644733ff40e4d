package labs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	assert.Equal(t, "lab-3.2\tAPI Design for Database Operator\t11\t100\nlab-3.3\tBuilding PostgreSQL Operator\t9\t100\nlab-3.4\tAdvanced Client Operations\t13\t100\nlab-4.1\tImplementing Status Conditions\t4\t100\nlab-4.2\tImplementing Finalizers\t4\t100\nlab-4.3\tSetting Up Watches and Indexes\t6\t100\nlab-4.4\tMulti-Phase Reconciliation\t4\t100\nlab-8.2\tComposing Operators\t13\t100\n", out)
	out, err = run(t, true, "--lang", "ru")
	require.NoError(t, err)
	assert.Contains(t, out, "Композиция операторов")
	assert.Contains(t, out, "LAB")
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
