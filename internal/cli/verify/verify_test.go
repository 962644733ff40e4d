package verify

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/classroom"
	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/userr"
)

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	s, _, _ := iostreams.Test(false)
	var got *Options
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	require.NoError(t, cmd.Execute())
	return got
}

func TestFlags(t *testing.T) {
	o := parse(t, "8.2", "--task", "6.2", "--task", "1.1,1.2", "--project", "/p", "-o", "junit", "--keep", "--timeout", "2m", "--lang", "ru", "--name", "dev")
	assert.Equal(t, "8.2", o.Lab)
	assert.Equal(t, []string{"6.2", "1.1", "1.2"}, o.Tasks)
	assert.Equal(t, "/p", o.Project)
	assert.Equal(t, "junit", o.Output)
	assert.True(t, o.Keep)
	assert.Equal(t, 2*time.Minute, o.Timeout)
	assert.Equal(t, "ru", o.Lang)
	assert.Equal(t, "dev", o.Name)

	o = parse(t, "lab-3.4")
	assert.Equal(t, "table", o.Output)
	assert.Equal(t, "k8s-operators-course", o.Name)
	assert.Equal(t, 15*time.Minute, o.Timeout)
}

func TestNeedsExactlyOneLab(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, func(context.Context, *Options) error { return nil })
	cmd.SetArgs([]string{})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	assert.Error(t, cmd.Execute())
}

func TestBadInputIsAUsageError(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{}}
	for name, o := range map[string]Options{
		"unknown lab":    {Lab: "lab-9.9", Output: "table"},
		"unknown task":   {Lab: "lab-8.2", Tasks: []string{"7.7"}, Output: "table"},
		"unknown format": {Lab: "lab-8.2", Output: "yaml"},
		"unknown lang":   {Lab: "lab-8.2", Output: "table", Lang: "de"},
		"no project dir": {Lab: "lab-8.2", Output: "table", Project: "/does/not/exist"},
	} {
		t.Run(name, func(t *testing.T) {
			o.f = f
			err := Run(context.Background(), &o)
			require.Error(t, err)
			assert.Equal(t, userr.ExitUsage, userr.Code(err), err.Error())
		})
	}
	err := Run(context.Background(), &Options{f: f, Lab: "9.9", Output: "table"})
	assert.Contains(t, userr.Message(err), "lab-4.4, lab-6.1, lab-6.2, lab-6.3, lab-6.4, lab-8.2")
}

// A policy that does not fit the lab and an unknown credit are usage
// errors, before any cluster is looked for.
func TestPolicyAndCreditAreChecked(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s}
	pol := filepath.Join(t.TempDir(), "p.yaml")
	require.NoError(t, os.WriteFile(pol, []byte("name: fall\nlabs:\n  lab-8.2:\n    points: {\"9.9\": 5}\n"), 0o644))
	err := Run(context.Background(), &Options{f: f, Lab: "8.2", Output: "table", Policy: pol, Timeout: time.Minute})
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	assert.Contains(t, userr.Message(err), "has no task 9.9")
	err = Run(context.Background(), &Options{f: f, Lab: "8.2", Output: "table", Credit: "half", Timeout: time.Minute})
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	assert.Contains(t, userr.Message(err), "unknown credit")
}

func TestClassroomOutput(t *testing.T) {
	assert.Equal(t, "classroom", parse(t, "lab-8.2", "-o", "classroom").Output)

	lab := &labs.Lab{ID: "lab-c", Tasks: []labs.Task{{ID: "1", Points: 3}, {ID: "2", Points: 7}}}
	rep := &report.Report{Lab: "lab-c", Lang: "en", Tasks: []*report.Task{
		{ID: "1", Title: "One", Points: 3, Hint: "read the docs", Checks: []*report.CheckResult{{ID: "a", Title: "A", Status: report.Fail, Observed: "nothing"}}},
		{ID: "2", Title: "Two", Points: 7, Checks: []*report.CheckResult{{ID: "b", Title: "B", Status: report.Pass}}},
	}}
	rep.Finish()
	s, out, errOut := iostreams.Test(false)
	require.NoError(t, write(s, lab, rep, classroom.Format, ""))
	runners, err := classroom.ReadOutputs(out.String())
	require.NoError(t, err, "stdout is only the tasks' encoded results")
	require.Len(t, runners, 2)
	assert.Equal(t, "task_1", runners[0].Runner)
	assert.Equal(t, 3, runners[0].Result.MaxScore)
	assert.Equal(t, 7, runners[1].Result.MaxScore)
	assert.Equal(t, 7.0, runners[0].Result.Tests[0].Score+runners[1].Result.Tests[0].Score)
	// The log shows the same text report as -o table.
	var text bytes.Buffer
	require.NoError(t, report.WriteText(&text, s.Styles(), rep, false))
	assert.Equal(t, text.String(), errOut.String())
	assert.Contains(t, errOut.String(), "hint: read the docs")
}

// For a grade (-o classroom), checks that could not decide run once more,
// as labctl grade runs them, and stderr says so; a student's own verify
// shows what it found at once.
func TestClassroomMeasuresAgainWhatCouldNotDecide(t *testing.T) {
	undecided := &report.Report{Tasks: []*report.Task{{ID: "2.1", Checks: []*report.CheckResult{
		{ID: "a", Tasks: []string{"2.1"}, Status: report.Error, Message: "watching db: connection refused"}}}}}
	decided := &report.Report{Tasks: []*report.Task{{ID: "2.1", Checks: []*report.CheckResult{
		{ID: "a", Tasks: []string{"2.1"}, Status: report.Pass}}}}}
	for _, output := range []string{classroom.Format, "table"} {
		s, _, errOut := iostreams.Test(false)
		o := &Options{f: &cmdutil.Factory{IOStreams: s}, Output: output}
		runs := 0
		rep, err := o.measure(context.Background(), func(context.Context) (*report.Report, error) {
			runs++
			if runs == 1 {
				return undecided, nil
			}
			return decided, nil
		})
		require.NoError(t, err)
		if output == classroom.Format {
			assert.Same(t, decided, rep)
			assert.Equal(t, "verified a second time: the first verification could not decide task 2.1\n", errOut.String())
			continue
		}
		assert.Same(t, undecided, rep)
		assert.Equal(t, 1, runs)
		assert.Empty(t, errOut.String())
	}
}
