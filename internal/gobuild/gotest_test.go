package gobuild

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Ginkgo suite in one Go test: its failed specs (colours removed), how
// many ran, the coverage, and the lines the failed test printed.
func TestParseTestEventsReadsGinkgoSpecs(t *testing.T) {
	raw := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestControllers"}
{"Action":"output","Package":"p","Test":"TestControllers","Output":"labctl-mutant-fired: no-secret\n"}
{"Action":"output","Package":"p","Test":"TestControllers","Output":"  \u001b[38;5;9m[FAIL]\u001b[0m Database Controller When progressing \u001b[1m[It] should create Secret and StatefulSet\u001b[0m\n"}
{"Action":"output","Package":"p","Test":"TestControllers","Output":"Ran 6 of 6 Specs in 7.4 seconds\n"}
{"Action":"fail","Package":"p","Test":"TestControllers"}
{"Action":"run","Package":"p","Test":"TestOther"}
{"Action":"pass","Package":"p","Test":"TestOther"}
{"Action":"output","Package":"p","Output":"coverage: 31.4% of statements\n"}
{"Action":"fail","Package":"p"}
not json
`
	run := ParseTestEvents([]byte(raw))
	assert.Equal(t, []string{"p TestControllers"}, run.Failed)
	assert.Equal(t, []string{"p TestOther"}, run.Passed)
	assert.Equal(t, []string{"Database Controller When progressing [It] should create Secret and StatefulSet"}, run.FailedSpecs)
	assert.Equal(t, 6, run.Specs)
	assert.InDelta(t, 31.4, run.Coverage, 0.01)
	assert.Contains(t, run.Output["p TestControllers"], "labctl-mutant-fired: no-secret")
	assert.NotContains(t, run.Output, "p TestOther")
	assert.True(t, run.Ran())
	assert.Empty(t, run.BuildFailed)
}

// A package that does not compile: its build output, and no test ran.
func TestParseTestEventsReadsABuildFailure(t *testing.T) {
	raw := `{"ImportPath":"p [p.test]","Action":"build-output","Output":"# p\n"}
{"ImportPath":"p [p.test]","Action":"build-output","Output":"./x_test.go:3:1: undefined: y\n"}
{"ImportPath":"p [p.test]","Action":"build-fail"}
{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}
{"Action":"fail","Package":"p","FailedBuild":"p [p.test]"}
`
	run := ParseTestEvents([]byte(raw))
	assert.Equal(t, []string{"p"}, run.BuildFailed)
	assert.Contains(t, run.BuildOutput, "undefined: y")
	assert.False(t, run.Ran())
	assert.Equal(t, -1.0, run.Coverage)
}

// Each failed Ginkgo spec is a failure of its own (its report, up to
// Ginkgo's delimiter); a failed plain test is one failure, all it printed.
func TestFailuresSplitsGinkgoSpecs(t *testing.T) {
	lines := []string{
		"Running Suite: Integration Suite - /p/test/integration",
		"Will run 2 of 4 specs",
		"------------------------------",
		"• [FAILED] [2.387 seconds]",
		"Database Operator Integration Database lifecycle [It] should create, update, and delete a Database",
		"/p/test/integration/integration_test.go:421",
		"  [FAILED] Expected success, but got an error:",
		`      Operation cannot be fulfilled on databases.database.example.com "x": the object has been modified; please apply your changes to the latest version and try again`,
		"------------------------------",
		"•",
		"------------------------------",
		"• [TIMEDOUT] [60.001 seconds]",
		"Database Operator Integration Database lifecycle [It] should create all child resources",
		"  [FAILED] in [It] - /p/test/integration/integration_test.go:501",
		"  Timed out after 60.000s.",
		"------------------------------",
		"Summarizing 2 Failures:",
		"  [FAIL] Database Operator Integration Database lifecycle [It] should create, update, and delete a Database",
	}
	var raw string
	for _, l := range lines {
		raw += `{"Action":"output","Package":"p","Test":"TestIntegration","Output":` + strconv.Quote(l+"\n") + "}\n"
	}
	raw += `{"Action":"fail","Package":"p","Test":"TestIntegration"}
{"Action":"output","Package":"p","Test":"TestPlain","Output":"    x_test.go:9: want 3, got 1\n"}
{"Action":"fail","Package":"p","Test":"TestPlain"}
`
	failures := ParseTestEvents([]byte(raw)).Failures()
	require.Len(t, failures, 3)
	assert.Contains(t, failures[0], "the object has been modified")
	assert.NotContains(t, failures[0], "Timed out")
	assert.Contains(t, failures[1], "Timed out after 60.000s.")
	assert.NotContains(t, failures[1], "Summarizing")
	assert.Equal(t, "    x_test.go:9: want 3, got 1", failures[2])
}
