package grade

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/userr"
)

func TestFlags(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	var got *Options
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"lab-8.2", "a", "b", "--roster", "r.csv", "--jobs", "3", "--timeout", "90s", "--out", "o", "--reveal-hidden", "--lang", "ru", "--open"})
	require.NoError(t, cmd.Execute())
	require.Equal(t, "lab-8.2", got.Lab)
	require.Equal(t, []string{"a", "b"}, got.Submissions)
	require.Equal(t, "r.csv", got.Roster)
	require.Equal(t, 3, got.Jobs)
	require.Equal(t, 90*time.Second, got.Timeout)
	require.Equal(t, "o", got.Out)
	require.True(t, got.RevealHidden)
	require.Equal(t, "ru", got.Lang)
	require.True(t, got.Open)
	require.NotNil(t, got.Opener, "the system's opener by default")

	cmd = NewCommand(&cmdutil.Factory{IOStreams: s}, func(context.Context, *Options) error { return nil })
	cmd.SetArgs([]string{})
	require.Error(t, cmd.Execute(), "LAB is required")
}

func TestRunRejectsBadInput(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s}
	err := Run(context.Background(), &Options{f: f, Lab: "lab-0.0", Timeout: time.Minute})
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	err = Run(context.Background(), &Options{f: f, Lab: "8.2", Timeout: time.Minute, Submissions: []string{"/no/such/dir"}})
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	err = Run(context.Background(), &Options{f: f, Lab: "8.2", Timeout: time.Minute, Roster: "/no/such/roster.csv"})
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	err = Run(context.Background(), &Options{f: f, Lab: "8.2", Timeout: time.Minute, Lang: "fr"})
	require.Equal(t, userr.ExitUsage, userr.Code(err))
	err = Run(context.Background(), &Options{f: f, Lab: "8.2", Timeout: time.Minute, Jobs: 0, jobsSet: true})
	require.Equal(t, userr.ExitUsage, userr.Code(err), "--jobs 0 is not 'choose for me'")
}

func TestClassroomFlags(t *testing.T) {
	dir := t.TempDir()
	export := filepath.Join(dir, "classroom_roster.csv")
	require.NoError(t, os.WriteFile(export, []byte("\"identifier\",\"github_username\",\"github_id\",\"name\"\n\"s1\",\"alice\",\"1\",\"A\"\n\"s2\",\"\",\"\",\"\"\n"), 0o644))
	repos := filepath.Join(dir, "repos.txt")
	require.NoError(t, os.WriteFile(repos, []byte("https://github.com/org/lab-8-2-bob\n"), 0o644))

	s, _, errOut := iostreams.Test(false)
	var got *Options
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"lab-8.2", "--roster", export, "--classroom-org", "org", "--assignment", "lab-8-2"})
	require.NoError(t, cmd.Execute())
	got.f = &cmdutil.Factory{IOStreams: s}
	subs, err := readRoster(got)
	require.NoError(t, err)
	require.Equal(t, []grade.Submission{{Student: "alice", Repo: "https://github.com/org/lab-8-2-alice"}}, subs)
	require.Contains(t, errOut.String(), "1 roster entries have no GitHub account linked (s2)")

	subs, err = readRoster(&Options{f: got.f, ClassroomRepos: repos, Assignment: "lab-8-2"})
	require.NoError(t, err)
	require.Equal(t, []grade.Submission{{Student: "bob", Repo: "https://github.com/org/lab-8-2-bob"}}, subs)

	subs, err = readRoster(&Options{f: got.f})
	require.NoError(t, err)
	require.Nil(t, subs, "no class list: the arguments are the submissions")

	for name, o := range map[string]*Options{
		"both lists":              {Roster: export, ClassroomRepos: repos},
		"org without roster":      {ClassroomOrg: "org", Assignment: "a"},
		"org with repos":          {ClassroomOrg: "org", Assignment: "a", ClassroomRepos: repos},
		"export without org":      {Roster: export},
		"assignment alone":        {Assignment: "a"},
		"bad org":                 {Roster: export, ClassroomOrg: "o/x", Assignment: "a"},
		"repos of another prefix": {ClassroomRepos: repos, Assignment: "lab-3-4"},
		"missing file":            {ClassroomRepos: filepath.Join(dir, "nope")},
	} {
		o.f = got.f
		_, err := readRoster(o)
		require.Equal(t, userr.ExitUsage, userr.Code(err), "%s: %v", name, err)
	}
}
