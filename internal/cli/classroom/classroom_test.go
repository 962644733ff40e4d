package classroom_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/classroom"
	classroomcmd "github.com/labctl/labctl/internal/cli/classroom"
	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/userr"
)

// embeddedLabs is the catalogue built into labctl, as a Factory reads it.
var embeddedLabs = (&cmdutil.Factory{}).Labs

func TestFlags(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	var got *classroomcmd.Options
	cmd := classroomcmd.NewCommand(&cmdutil.Factory{IOStreams: s, Version: "v0.3.0"}, func(_ context.Context, o *classroomcmd.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"init", "lab-8.2", "--provider", "local", "--dir", "/tmp/x", "--force", "--labctl-version", "v0.4.0"})
	require.NoError(t, cmd.Execute())
	require.NotNil(t, got.Labs, "the catalogue is the factory's")
	got.Labs = nil
	require.Equal(t, classroomcmd.Options{Streams: s, BuiltVersion: "v0.3.0", Lab: "lab-8.2", Provider: "local", Dir: "/tmp/x", Force: true, LabctlVersion: "v0.4.0", Credit: "tasks"}, *got)
}

// --lang, --credit and --policy reach verify in the workflow; the policy
// is checked against the lab and copied into the repository.
func TestInitWithLangCreditAndPolicy(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(t.TempDir(), "fall.yaml")
	require.NoError(t, os.WriteFile(pol, []byte("name: fall-2026\nlabs:\n  lab-8.2:\n    points: {\"1.1\": 10}\n"), 0o644))
	s, out, _ := iostreams.Test(false)
	o := &classroomcmd.Options{Streams: s, Labs: embeddedLabs, BuiltVersion: "v0.4.0", Lab: "8.2", Provider: "kind", Dir: dir, Lang: "RU", Credit: "checks", Policy: pol}
	require.NoError(t, classroomcmd.Run(context.Background(), o))
	wf, err := os.ReadFile(filepath.Join(dir, ".github", "workflows", "classroom.yml"))
	require.NoError(t, err)
	require.Contains(t, string(wf), "labctl verify lab-8.2 --provider kind --project . --lang ru --credit checks --policy .github/labctl-policy.yaml -o classroom")
	copied, err := os.ReadFile(filepath.Join(dir, ".github", "labctl-policy.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(copied), "fall-2026")
	require.Contains(t, out.String(), "labctl-policy.yaml")

	// A policy that does not fit the lab writes nothing.
	other := t.TempDir()
	require.NoError(t, os.WriteFile(pol, []byte("name: x\nlabs:\n  lab-8.2:\n    points: {\"9.9\": 1}\n"), 0o644))
	o.Dir, o.Force = other, false
	err = classroomcmd.Run(context.Background(), o)
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	entries, _ := os.ReadDir(other)
	require.Empty(t, entries)

	o.Policy, o.Credit = "", "half"
	require.Equal(t, userr.ExitUsage, userr.Code(classroomcmd.Run(context.Background(), o)))
}

// classroom fail prints every task failed, with the reason, as verify -o
// classroom prints its results, and exits 3 (tasks failed).
func TestFailReportsEveryTask(t *testing.T) {
	s, out, _ := iostreams.Test(false)
	cmd := classroomcmd.NewCommand(&cmdutil.Factory{IOStreams: s, Version: "v0.4.0"}, nil)
	cmd.SetArgs([]string{"fail", "lab-3.1", "--reason", "labctl up failed: the operator does not compile"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	require.Equal(t, userr.ExitChecks, userr.Code(err))
	runners, err := classroom.ReadOutputs(out.String())
	require.NoError(t, err)
	require.NotEmpty(t, runners)
	for _, r := range runners {
		require.Equal(t, classroom.StatusFail, r.Result.Status)
		require.Contains(t, r.Result.Tests[0].Message, "does not compile")
	}

	cmd = classroomcmd.NewCommand(&cmdutil.Factory{IOStreams: s, Version: "v0.4.0"}, nil)
	cmd.SetArgs([]string{"fail", "lab-3.1"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	require.Equal(t, userr.ExitUsage, userr.Code(cmd.Execute()))
}

func TestInitWritesOnceWithoutForce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n\ngo 1.26\n"), 0o644))
	s, out, _ := iostreams.Test(false)
	o := &classroomcmd.Options{Streams: s, Labs: embeddedLabs, BuiltVersion: "v0.4.0", Lab: "8.2", Provider: "kind", Dir: dir}
	require.NoError(t, classroomcmd.Run(context.Background(), o))
	path := filepath.Join(dir, ".github", "workflows", "classroom.yml")
	first, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(first), "VERSION: v0.4.0")
	require.Contains(t, string(first), `go install "github.com/labctl/labctl/cmd/labctl@$VERSION"`)
	require.Contains(t, string(first), "go-version-file: go.mod")
	require.Contains(t, out.String(), "lab-8.2, 13 tasks, 100 points")

	// A second init leaves the workflow alone unless --force.
	require.NoError(t, os.WriteFile(path, []byte("mine\n"), 0o644))
	o.Provider = "local"
	err = classroomcmd.Run(context.Background(), o)
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	require.Contains(t, userr.Message(err), "--force")
	kept, _ := os.ReadFile(path)
	require.Equal(t, "mine\n", string(kept))

	o.Force = true
	require.NoError(t, classroomcmd.Run(context.Background(), o))
	replaced, _ := os.ReadFile(path)
	require.Contains(t, string(replaced), "labctl up --provider local --project .")
	entries, _ := os.ReadDir(filepath.Dir(path))
	require.Len(t, entries, 1, "no temporary file left behind")
}

func TestInitBadInput(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := iostreams.Test(false)
	for name, o := range map[string]classroomcmd.Options{
		"unknown lab":          {Lab: "lab-9.9", Provider: "kind", Dir: dir, BuiltVersion: "v0.4.0"},
		"existing provider":    {Lab: "lab-8.2", Provider: "existing", Dir: dir, BuiltVersion: "v0.4.0"},
		"unpinnable build":     {Lab: "lab-8.2", Provider: "kind", Dir: dir, BuiltVersion: "dev"},
		"bad version flag":     {Lab: "lab-8.2", Provider: "kind", Dir: dir, LabctlVersion: "main"},
		"missing template dir": {Lab: "lab-8.2", Provider: "kind", Dir: filepath.Join(dir, "nope"), BuiltVersion: "v0.4.0"},
	} {
		o.Streams, o.Labs = s, embeddedLabs
		err := classroomcmd.Run(context.Background(), &o)
		require.Equal(t, userr.ExitUsage, userr.Code(err), "%s: %v", name, err)
	}
	_, err := os.Stat(filepath.Join(dir, ".github"))
	require.True(t, os.IsNotExist(err), "nothing written")
}

// init reads the factory's catalogue, as every other command does: a lab
// that is only in that catalogue gets its workflow.
func TestInitReadsTheFactorysCatalogue(t *testing.T) {
	dir := t.TempDir()
	s, out, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Version: "v0.4.0", LabFS: os.DirFS("../../../testdata/fixture-lab/labs")}
	cmd := classroomcmd.NewCommand(f, nil)
	cmd.SetArgs([]string{"init", "lab-0.1", "--dir", dir})
	require.NoError(t, cmd.Execute())
	wf, err := os.ReadFile(filepath.Join(dir, ".github", "workflows", "classroom.yml"))
	require.NoError(t, err)
	require.Contains(t, string(wf), "labctl verify lab-0.1 ")
	require.Contains(t, out.String(), "lab-0.1")
}

// A runner is not the student's machine: lab 6.1's tools (ginkgo,
// setup-envtest, dlv, installed where the student works) get no test, and
// their points are not in the assignment's total.
func TestInitLeavesOutTheStudentsMachine(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := iostreams.Test(false)
	o := &classroomcmd.Options{Streams: s, Labs: embeddedLabs, BuiltVersion: "v0.4.0", Lab: "6.1", Provider: "local", Dir: dir}
	require.NoError(t, classroomcmd.Run(context.Background(), o))
	raw, err := os.ReadFile(filepath.Join(dir, ".github", "workflows", "classroom.yml"))
	require.NoError(t, err)
	wf := string(raw)
	for _, task := range []string{"4.1", "4.2"} {
		require.Contains(t, wf, classroom.TaskRunner(task))
	}
	for _, task := range []string{"1.1", "1.2", "1.3"} {
		require.NotContains(t, wf, classroom.TaskRunner(task))
	}

	s, out, _ := iostreams.Test(false)
	cmd := classroomcmd.NewCommand(&cmdutil.Factory{IOStreams: s, Version: "v0.4.0"}, nil)
	cmd.SetArgs([]string{"fail", "lab-6.1", "--reason", "go test does not build"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	require.Equal(t, userr.ExitChecks, userr.Code(cmd.Execute()))
	runners, err := classroom.ReadOutputs(out.String())
	require.NoError(t, err)
	require.Len(t, runners, 2, "one per graded task")
}
