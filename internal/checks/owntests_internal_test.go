package checks

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/labs"
	labsfs "github.com/labctl/labctl/labs"
)

// Lab 6.1: kubebuilder's scaffold spec fails on a project with lab 3.2's
// validation, through no fault of the student's. That failure alone
// warns; any other failure beside it, or the same spec failing for
// another reason, still fails.
func TestCourseMistakeExcusesOnlyItself(t *testing.T) {
	scaffold := lab61CourseMistake(t)
	const suite = "github.com/example/postgres-operator/internal/controller TestControllers"
	rejected := `      Database.database.example.com "test-resource" is invalid: spec.storage.size: Invalid value: "": spec.storage.size in body should match '^[0-9]+(Gi|Mi)$'`
	run := func(specs []string, lines ...string) *gobuild.TestRun {
		return &gobuild.TestRun{Failed: []string{suite}, FailedSpecs: specs, Output: map[string][]string{suite: append([]string{"  [FAILED] Expected success, but got an error:"}, lines...)}}
	}
	// What go test -json said of the course's project at lab 6.1
	// (lab-6.1's course-scaffold-tests variant, run with envtest).
	raw, err := os.ReadFile(filepath.Join("testdata", "scaffold-spec-rejected.json"))
	require.NoError(t, err)
	reported := gobuild.ParseTestEvents(raw)
	require.Len(t, reported.FailedSpecs, 1)
	assert.True(t, scaffold.excuses(reported), "the scaffold spec rejected by the API's validation, as go test reported it")

	spec := "Database Controller When reconciling a resource [It] should successfully reconcile the resource"
	assert.True(t, scaffold.excuses(run([]string{spec}, rejected)), "the scaffold spec rejected by the API's validation")

	for name, r := range map[string]*gobuild.TestRun{
		"another spec fails too":              run([]string{spec, "Database Controller [It] should create Service"}, rejected),
		"the scaffold spec fails differently": run([]string{spec}, `      reconcile: secrets "test-resource-credentials" is forbidden`),
		"the student's own spec is invalid":   run([]string{spec}, `      Database.database.example.com "test-resource" is invalid: spec.storage.size: Invalid value: "1GB": spec.storage.size in body should match '^[0-9]+(Gi|Mi)$'`),
		"the suite does not start":            run([]string{"[BeforeSuite]"}, "unable to install CRDs onto control plane"),
		"a plain Go test fails":               {Failed: []string{suite}, Output: map[string][]string{suite: {rejected}}},
		"it does not compile":                 {Failed: []string{suite}, FailedSpecs: []string{spec}, BuildFailed: []string{"./internal/controller"}, Output: map[string][]string{suite: {rejected}}},
	} {
		assert.False(t, scaffold.excuses(r), name)
	}
	var none *courseMistake
	assert.False(t, none.excuses(run([]string{spec}, rejected)), "a lab that names no course mistake excuses nothing")
}

// lab61CourseMistake is the course mistake lab-6.1.yaml names.
func lab61CourseMistake(t *testing.T) *courseMistake {
	t.Helper()
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	lab, ok := labs.Find(all, "lab-6.1")
	require.True(t, ok)
	for _, sc := range lab.Scenarios {
		for _, st := range sc.Steps {
			if st.Check != nil && st.Check.Name == "go-test" {
				p, err := decodeParams(registry["go-test"], st.Check.With)
				require.NoError(t, err)
				m := p.(*goTestParams).CourseMistake
				require.NotNil(t, m)
				return m
			}
		}
	}
	t.Fatal("lab-6.1 has no go-test step")
	return nil
}
