package ghworkflow

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	wf, err := Parse([]byte(`
name: CI
on:
  push:
  pull_request:
    branches: [main]
env:
  IMG: op:ci
jobs:
  test:
    steps:
      - run: |
          cat > x.yaml <<'END'
            e2e: not a job
          END
          make test
  lint:
    steps:
      - run: make lint
  e2e:
    env: {CLUSTER: it}
    steps:
      - uses: actions/checkout@v4
      - name: Load
        run: kind load docker-image ${{ env.IMG }} --name $CLUSTER
        env: {EXTRA: "1"}
`))
	require.NoError(t, err)
	assert.Equal(t, []string{"pull_request", "push"}, wf.On)
	require.Len(t, wf.Jobs, 3)
	assert.Equal(t, []string{"test", "lint", "e2e"}, []string{wf.Jobs[0].ID, wf.Jobs[1].ID, wf.Jobs[2].ID}, "jobs keep the file's order, whatever their steps' text holds")
	e2e := wf.Jobs[2]
	assert.Equal(t, "actions/checkout@v4", e2e.Steps[0].Uses)
	env := StepEnv(wf, e2e, e2e.Steps[1])
	assert.Equal(t, map[string]string{"IMG": "op:ci", "CLUSTER": "it", "EXTRA": "1"}, env)
	assert.Equal(t, []string{"kind load docker-image op:ci --name it"}, []string{Expand(Commands(e2e.Steps[1].Run)[0], env)})

	_, err = Parse([]byte("name: nothing\non: push\n"))
	assert.Error(t, err, "a workflow has jobs")
}

func TestCommands(t *testing.T) {
	run := "# build\nmake docker-build \\\n  IMG=x\nkubectl wait a && kubectl wait b || true; echo done\n\n"
	assert.Equal(t, []string{"make docker-build IMG=x", "kubectl wait a", "kubectl wait b", "true", "echo done"}, Commands(run))
}

func TestExpandLeavesWhatItCannotResolve(t *testing.T) {
	assert.Equal(t, "a ${{ env.NOPE }} $HOME b", Expand("${A} ${{ env.NOPE }} $HOME ${{env.B}}", map[string]string{"A": "a", "B": "b"}))
}
