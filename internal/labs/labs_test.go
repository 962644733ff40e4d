package labs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	labsfs "github.com/labctl/labctl/labs"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/userr"
)

func TestEmbeddedLabsLoad(t *testing.T) {
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	assert.Equal(t, []string{"lab-1.4", "lab-2.4", "lab-3.1", "lab-3.2", "lab-3.3", "lab-3.4", "lab-4.1", "lab-4.2", "lab-4.3", "lab-4.4", "lab-6.1", "lab-6.2", "lab-6.3", "lab-6.4", "lab-8.2"}, labs.IDs(all))
	for _, l := range all {
		assert.Positive(t, l.MaxPoints(), l.ID)
		assert.NotEmpty(t, l.Title.RU, l.ID)
	}
	l, ok := labs.Find(all, "8.2")
	require.True(t, ok)
	assert.Equal(t, "lab-8.2", l.ID)
	_, ok = l.Task("3.2")
	assert.True(t, ok)
}

const minimal = `
apiVersion: labctl.dev/v1alpha1
kind: Lab
id: lab-1.1
title: {en: T, ru: Т}
defaults:
  timeout: {local: 1s, kind: 2s}
  for: 1s
tasks:
- id: "1.1"
  points: 1
  title: {en: a, ru: а}
  hint: {en: b, ru: б}
scenarios:
- name: s
  steps:
  - id: c
    tasks: ["1.1"]
    title: {en: c, ru: ц}
    expect:
      ref: statefulset/x
      eventually: [{path: spec.replicas, equals: 1}]
`

func TestParseMinimal(t *testing.T) {
	l, err := labs.Parse("x.yaml", []byte(minimal))
	require.NoError(t, err)
	assert.Equal(t, time.Second, l.Defaults.Timeout.For(labs.ProfileLocal))
	assert.Equal(t, 2*time.Second, l.Defaults.Timeout.For(labs.ProfileKind))
	assert.Equal(t, time.Second, l.Defaults.For.For(labs.ProfileKind))
	st := l.Scenarios[0].Steps[0]
	assert.Equal(t, labs.Ref{Kind: "statefulset", Name: "x"}, st.Expect.Ref)
	gvk, err := l.ResolveKind("statefulset")
	require.NoError(t, err)
	assert.Equal(t, "apps", gvk.Group)
}

func TestValidateFindsMistakes(t *testing.T) {
	cases := map[string]struct{ from, to, want string }{
		"unknown field":      {"points: 1", "pionts: 1", `tasks[0]: unknown field "pionts"`},
		"task without check": {`tasks: ["1.1"]`, `tasks: ["2.1"]`, "unknown task 2.1"},
		"two operations":     {"    expect:", "    delete: {ref: statefulset/x}\n    expect:", "exactly one of"},
		"unknown kind":       {"ref: statefulset/x", "ref: widget/x", `unknown kind "widget"`},
		"bad path":           {"path: spec.replicas,", `path: "spec[x]",`, "selector"},
		"bad task id":        {`- id: "1.1"`, `- id: "one"`, `tasks[0].id: "one" does not match ^([0-9]+\.[0-9]+|cleanup)$ (ID is the task's number in the lab text (1.2), or cleanup.)`},
		"missing russian":    {"title: {en: a, ru: а}", "title: {en: a}", "tasks[0].title.ru: required field missing"},
		"nested unknown":     {"eventually: [{path", "evantually: [{path", `scenarios[0].steps[0].expect: unknown field "evantually"`},
		"wrong enum":         {"    tasks: [\"1.1\"]\n", "    tasks: [\"1.1\"]\n    severity: error\n", `scenarios[0].steps[0].severity: "error": want warn`},
		"wrong type":         {"points: 1", "points: many", "tasks[0].points: must be of type integer"},
		"duplicate key":      {"points: 1", "points: 1\n  points: 2", `key "points" already set in map`},
		"bad timeout":        {"for: 1s", "for: soon", "defaults.for"},
		"assertion untitled": {"    title: {en: c, ru: ц}\n", "", "an assertion needs a title"},
		"has and equals":     {"equals: 1}", "equals: 1, has: {a: 1}}", "exactly one of"},
		"has without path":   {"{path: spec.replicas, equals: 1}", "{has: [1]}", "has without a path needs a partial object"},
		"action with tasks":  {"    expect:\n      ref: statefulset/x\n      eventually: [{path: spec.replicas, equals: 1}]", "    delete: {ref: statefulset/x}", "is an action"},
		"meanwhile first":    {"    tasks: [\"1.1\"]\n", "    tasks: [\"1.1\"]\n    meanwhile: true\n", "needs an assertion (expect or check) right before it"},
		"meanwhile action":   {"  steps:\n", "  steps:\n  - delete: {ref: statefulset/y}\n  - delete: {ref: statefulset/x}\n    meanwhile: true\n", "is an action"},
		"meanwhile gate":     {"  - id: c\n", "  - id: g\n    tasks: [\"1.1\"]\n    gate: true\n    title: {en: g, ru: г}\n    expect: {ref: statefulset/x, absent: true}\n  - id: c\n    meanwhile: true\n", "cannot run alongside a gate"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(minimal, c.from, c.to, 1)
			require.NotEqual(t, minimal, src, "test case does not change the input")
			_, err := labs.Parse("x.yaml", []byte(src))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestTextFallsBackToEnglish(t *testing.T) {
	assert.Equal(t, "a", labs.Text{EN: "a"}.In("ru"))
	assert.Equal(t, "б", labs.Text{EN: "a", RU: "б"}.In("ru"))
	assert.Equal(t, "a", labs.Text{EN: "a", RU: "б"}.In("en"))
}

func TestParsePath(t *testing.T) {
	p, err := labs.ParsePath("status.conditions[type=Ready].reason")
	require.NoError(t, err)
	assert.Equal(t, []labs.PathElem{{Field: "status"}, {Field: "conditions"}, {Key: "type", Val: "Ready"}, {Field: "reason"}}, p)

	p, err = labs.ParsePath("spec.ports[1].port")
	require.NoError(t, err)
	one := 1
	assert.Equal(t, []labs.PathElem{{Field: "spec"}, {Field: "ports"}, {Index: &one}, {Field: "port"}}, p)

	_, err = labs.ParsePath("spec.ports[-1].port")
	assert.Error(t, err)
}

func TestFindLab(t *testing.T) {
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	l, err := labs.FindLab(all, "3.4")
	require.NoError(t, err)
	assert.Equal(t, "lab-3.4", l.ID)
	_, err = labs.FindLab(all, "9.9")
	require.Error(t, err)
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	assert.Contains(t, userr.Message(err), `there is no lab "9.9"`)
}

func TestResolveLang(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		flag string
		env  map[string]string
		want string
	}{
		{"", map[string]string{"LANG": "ru_RU.UTF-8"}, "ru"},
		{"", map[string]string{"LANG": "en_US.UTF-8"}, "en"},
		{"", map[string]string{"LANG": "ru_RU.UTF-8", "LC_ALL": "C"}, "en"},
		{"", map[string]string{"LC_MESSAGES": "ru_RU"}, "ru"},
		{"", nil, "en"},
		{"ru", map[string]string{"LANG": "en_US"}, "ru"},
	} {
		got, err := labs.ResolveLang(c.flag, env(c.env))
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "%v %v", c.flag, c.env)
	}
}
