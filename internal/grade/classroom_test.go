package grade_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/grade"
)

// A GitHub Classroom roster export, as Classroom writes it: quoted, with
// students who never linked a GitHub account.
const classroomExport = `"identifier","github_username","github_id","name"
"s-1001","alice","583231","Alice Liddell"
"s-1002","","",""
"bob@uni.example","Bob-K","1234","Bob K"
"s-1004","","","Carol"
`

func TestParseClassroomRoster(t *testing.T) {
	cl := &grade.Classroom{Org: "k8s-course", Assignment: "lab-8-2"}
	subs, unlinked, err := grade.ParseRosterWith(strings.NewReader(classroomExport), grade.RosterOptions{Classroom: cl})
	require.NoError(t, err)
	require.Equal(t, []grade.Submission{
		{Student: "alice", Repo: "https://github.com/k8s-course/lab-8-2-alice"},
		{Student: "Bob-K", Repo: "https://github.com/k8s-course/lab-8-2-Bob-K"},
	}, subs)
	require.Equal(t, []string{"s-1002", "s-1004"}, unlinked, "not linked to a GitHub account: no repository")

	// Without the assignment the export names no repositories.
	_, _, err = grade.ParseRosterWith(strings.NewReader(classroomExport), grade.RosterOptions{})
	require.ErrorContains(t, err, "--classroom-org ORG --assignment PREFIX")
	_, err = grade.ParseRoster(strings.NewReader(classroomExport), "/r")
	require.ErrorContains(t, err, "--classroom-org")

	// A student column sets the id; the username still names the repository.
	subs, _, err = grade.ParseRosterWith(strings.NewReader("student,github_username\nalice-l,alice\n"), grade.RosterOptions{Classroom: cl})
	require.NoError(t, err)
	require.Equal(t, []grade.Submission{{Student: "alice-l", Repo: "https://github.com/k8s-course/lab-8-2-alice"}}, subs)
}

func TestParseClassroomRosterRejects(t *testing.T) {
	cl := &grade.Classroom{Org: "k8s-course", Assignment: "lab-8-2"}
	for name, tc := range map[string]struct {
		roster string
		cl     grade.Classroom
		want   string
	}{
		"username that is no username": {"github_username\nalice/../../x\n", *cl, "not a GitHub username"},
		"username as a flag":           {"github_username\n-alice\n", *cl, "not a GitHub username"},
		"same student twice":           {"github_username\nalice\nalice\n", *cl, "already on row 2"},
		"organisation with a slash":    {"github_username\nalice\n", grade.Classroom{Org: "a/b", Assignment: "x"}, "invalid GitHub organisation"},
		"empty assignment":             {"github_username\nalice\n", grade.Classroom{Org: "a"}, "invalid assignment prefix"},
		"student id grade cannot use":  {"student,github_username\nA B,alice\n", *cl, "invalid student id"},
	} {
		_, _, err := grade.ParseRosterWith(strings.NewReader(tc.roster), grade.RosterOptions{Classroom: &tc.cl})
		require.ErrorContains(t, err, tc.want, name)
	}
}

func TestParseRepoList(t *testing.T) {
	in := "# lab 8.2\nhttps://github.com/k8s-course/lab-8-2-alice\n\ngit@github.com:k8s-course/lab-8-2-Bob-K.git\r\nhttps://github.com/k8s-course/LAB-8-2-carol.git/\n../local/lab-8-2-dave\n"
	subs, err := grade.ParseRepoList(strings.NewReader(in), "lab-8-2", "/courses")
	require.NoError(t, err)
	require.Equal(t, []grade.Submission{
		{Student: "alice", Repo: "https://github.com/k8s-course/lab-8-2-alice"},
		{Student: "Bob-K", Repo: "git@github.com:k8s-course/lab-8-2-Bob-K.git"},
		{Student: "carol", Repo: "https://github.com/k8s-course/LAB-8-2-carol.git/"},
		{Student: "dave", Repo: "/local/lab-8-2-dave"},
	}, subs)

	// Without an assignment the repository's name is the id, made valid
	// as directory names are.
	subs, err = grade.ParseRepoList(strings.NewReader("https://git.example.edu/x/_op erator\n"), "", "/")
	require.ErrorContains(t, err, "not a repository URL")
	subs, err = grade.ParseRepoList(strings.NewReader("https://git.example.edu/x/_op~erator.git\n"), "", "/")
	require.NoError(t, err)
	require.Equal(t, "op-erator", subs[0].Student)

	for name, tc := range map[string]struct{ in, want string }{
		"other assignment": {"https://github.com/o/lab-3-4-alice\n", "not a repository of assignment lab-8-2"},
		"prefix only":      {"https://github.com/o/lab-8-2-\n", "not a repository of assignment"},
		"flag":             {"--upload-pack=evil\n", "not a repository URL"},
		"twice":            {"https://github.com/o/lab-8-2-a\nhttps://github.com/p/lab-8-2-a\n", "already on line 1"},
		"empty":            {"# nothing\n", "no repositories"},
	} {
		_, err := grade.ParseRepoList(strings.NewReader(tc.in), "lab-8-2", "/")
		require.ErrorContains(t, err, tc.want, name)
	}
}
