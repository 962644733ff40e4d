package classroom_test

import (
	"bytes"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/classroom"
	"github.com/labctl/labctl/internal/labs"
	labsfs "github.com/labctl/labctl/labs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func lab82(t *testing.T) *labs.Lab {
	t.Helper()
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	lab, ok := labs.Find(all, "lab-8.2")
	require.True(t, ok)
	return lab
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to write it")
	require.Equal(t, string(want), string(got), "differs from %s (go test -update rewrites it)", path)
}

func TestWorkflowGolden(t *testing.T) {
	lab := lab82(t)
	for _, tc := range []struct {
		provider, goFile, golden string
	}{
		// With a go.mod the workflow sets up the project's Go; without, labctl's.
		{classroom.ProviderKind, "go.mod", "workflow-kind.yml"},
		{classroom.ProviderLocal, "", "workflow-local.yml"},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, classroom.RenderWorkflow(&b, classroom.WorkflowOptions{
				Lab: lab, Provider: tc.provider, LabctlVersion: "v0.4.0", GoVersionFile: tc.goFile,
			}))
			golden(t, tc.golden, b.Bytes())
			checkWorkflowYAML(t, lab, tc.provider, b.Bytes())
			lint(t, b.Bytes())
		})
	}
}

// checkWorkflowYAML parses the workflow and checks what the issue asks of
// it: least permissions, pinned actions, timeouts, the reporter wired to
// the verify step's output.
func checkWorkflowYAML(t *testing.T, lab *labs.Lab, provider string, raw []byte) {
	t.Helper()
	var wf struct {
		Name        string            `json:"name"`
		On          map[string]any    `json:"on"`
		Permissions map[string]string `json:"permissions"`
		Concurrency struct {
			Group            string `json:"group"`
			CancelInProgress bool   `json:"cancel-in-progress"`
		} `json:"concurrency"`
		Jobs map[string]struct {
			Name           string `json:"name"`
			RunsOn         string `json:"runs-on"`
			If             string `json:"if"`
			TimeoutMinutes int    `json:"timeout-minutes"`
			Steps          []struct {
				ID             string            `json:"id"`
				Name           string            `json:"name"`
				Uses           string            `json:"uses"`
				Run            string            `json:"run"`
				If             string            `json:"if"`
				TimeoutMinutes int               `json:"timeout-minutes"`
				Env            map[string]string `json:"env"`
				With           map[string]any    `json:"with"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	require.NoError(t, yaml.UnmarshalStrict(raw, &wf), "valid YAML, no field beyond the known ones")
	require.Contains(t, wf.On, "push")
	require.Equal(t, map[string]string{"contents": "read", "actions": "read"}, wf.Permissions)
	// the names GitHub Classroom records a score from
	require.Equal(t, "Autograding Tests", wf.Name)
	require.Len(t, wf.Jobs, 1)
	require.Contains(t, wf.Jobs, "run-autograding-tests")
	job := wf.Jobs["run-autograding-tests"]
	require.Equal(t, "autograding-${{ github.ref }}", wf.Concurrency.Group, "one run per branch at a time")
	require.Positive(t, job.TimeoutMinutes)
	pinned := regexp.MustCompile(`^[a-z0-9-]+/[a-z0-9/-]+@[0-9a-f]{40}$`)
	var verify, reporter, upload bool
	for _, st := range job.Steps {
		if st.Uses != "" {
			require.Regexp(t, pinned, st.Uses, "actions are pinned to a commit")
		}
		if strings.Contains(st.Run, "labctl up") || strings.Contains(st.Run, "controlplane build") || strings.Contains(st.Run, "labctl verify") {
			require.Positive(t, st.TimeoutMinutes, "long step %q has a timeout", st.Name)
		}
		switch {
		case st.ID == classroom.RunnerID:
			verify = true
			require.Contains(t, st.Run, "labctl verify "+lab.ID+" --provider "+provider+" --project . -o classroom")
			require.Contains(t, st.Run, `>> "$GITHUB_OUTPUT"`)
			// It runs when labctl up failed too, and reports every task
			// failed with labctl up's error.
			require.Contains(t, st.If, "steps.up.outcome == 'failure'")
			require.Contains(t, st.Run, "labctl classroom fail "+lab.ID+" --reason")
		case st.ID == "up":
			require.Contains(t, st.Run, "set -o pipefail", "tee must not hide labctl up's failure")
		case strings.HasPrefix(st.Uses, "classroom-resources/autograding-grading-reporter@"):
			reporter = true
			// One runner per task, each reading its task's step output.
			var runners []string
			for _, lt := range lab.Tasks {
				r := classroom.TaskRunner(lt.ID)
				runners = append(runners, r)
				require.Equal(t, "${{ steps.labctl.outputs."+r+" }}", st.Env[classroom.ResultsEnv(r)])
			}
			require.Equal(t, strings.Join(runners, ","), st.With["runners"])
			require.Len(t, st.Env, len(lab.Tasks))
		case strings.HasPrefix(st.Uses, "actions/upload-artifact@"):
			upload = true
			require.Equal(t, "failure()", st.If)
		}
	}
	require.True(t, verify && reporter && upload, "verify, reporter and log upload steps")
	if provider == classroom.ProviderLocal {
		require.Contains(t, string(raw), "labctl controlplane build")
		require.Contains(t, string(raw), "actions/cache/save@")
	} else {
		require.Contains(t, string(raw), "kind@v0.33.0 export logs")
	}
}

// lint runs actionlint (as a library) over the workflow; it must report
// nothing. Its shellcheck rule runs when shellcheck is installed.
func lint(t *testing.T, raw []byte) {
	t.Helper()
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Log("shellcheck is not installed: actionlint checks the workflow without it (apt-get install shellcheck)")
	}
	for _, e := range lintErrors(t, raw) {
		t.Errorf("actionlint: %s:%d:%d: %s [%s]", e.Filepath, e.Line, e.Column, e.Message, e.Kind)
	}
}

func lintErrors(t *testing.T, raw []byte) []*actionlint.Error {
	t.Helper()
	opts := &actionlint.LinterOptions{WorkingDir: t.TempDir()}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		opts.Shellcheck = sc
	}
	l, err := actionlint.NewLinter(io.Discard, opts)
	require.NoError(t, err)
	errs, err := l.Lint(classroom.WorkflowPath, raw, nil)
	require.NoError(t, err)
	return errs
}

// TestLintCatchesMistakes shows the lint is not vacuous: a step id that
// does not exist and an unquoted variable (shellcheck) are reported.
func TestLintCatchesMistakes(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, classroom.RenderWorkflow(&b, classroom.WorkflowOptions{
		Lab: lab82(t), Provider: classroom.ProviderKind, LabctlVersion: "v0.4.0",
	}))
	broken := strings.Replace(b.String(), "steps.labctl.outputs.task_1_1 }}", "steps.verify.outputs.task_1_1 }}", 1)
	require.Len(t, lintErrors(t, []byte(broken)), 1)
	if _, err := exec.LookPath("shellcheck"); err == nil {
		broken = strings.Replace(b.String(), `cat "$results" >> "$GITHUB_OUTPUT"`, `cat $results >> "$GITHUB_OUTPUT"`, 1)
		errs := lintErrors(t, []byte(broken))
		require.Len(t, errs, 1)
		require.Equal(t, "shellcheck", errs[0].Kind)
	}
}

func TestWorkflowRejectsWhatItCannotPin(t *testing.T) {
	lab := lab82(t)
	for _, o := range []classroom.WorkflowOptions{
		{Lab: lab, Provider: "existing", LabctlVersion: "v0.4.0"},
		{Lab: lab, Provider: "kind", LabctlVersion: "dev"},
		{Lab: lab, Provider: "kind", LabctlVersion: "v0.4.0+dirty"},
		{Lab: lab, Provider: "kind", LabctlVersion: "v0.4.0; rm -rf /"},
		{Lab: lab, Provider: "kind", LabctlVersion: "v0.4.0", GoVersionFile: "go.mod\nx: y"},
		{Lab: lab, Provider: "kind", LabctlVersion: "v0.4.0", PolicyFile: "p.yaml; curl evil"},
		{Lab: lab, Provider: "kind", LabctlVersion: "v0.4.0", Lang: "fr"},
		{Lab: lab, Provider: "kind", LabctlVersion: "v0.4.0", Credit: "half"},
	} {
		require.Error(t, classroom.RenderWorkflow(&bytes.Buffer{}, o), "%+v", o)
	}
}

func TestInstallVersion(t *testing.T) {
	require.Equal(t, "v1.2.3", classroom.InstallVersion("v1.2.3", "dev"))
	require.Equal(t, "v0.5.0", classroom.InstallVersion("", "v0.5.0"))
	// A test binary records no module version: nothing to pin.
	require.Equal(t, "", classroom.InstallVersion("", "dev"))
}

// Lab 1.4 has no operator: the workflow starts a cluster without one, and
// verify reads the repository (its website-crd.yaml).
func TestWorkflowForALabWithoutOperator(t *testing.T) {
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	lab, ok := labs.Find(all, "lab-1.4")
	require.True(t, ok)
	var b bytes.Buffer
	require.NoError(t, classroom.RenderWorkflow(&b, classroom.WorkflowOptions{
		Lab: lab, Provider: classroom.ProviderLocal, LabctlVersion: "v0.4.0",
	}))
	require.Contains(t, b.String(), "\n          labctl up --provider local --no-operator 2>&1 | tee")
	require.NotContains(t, b.String(), "labctl up --provider local --project .")
	require.Contains(t, b.String(), "labctl verify lab-1.4 --provider local --project . -o classroom")
	checkWorkflowYAML(t, lab, classroom.ProviderLocal, b.Bytes())
	lint(t, b.Bytes())
}

// Only a release can be pinned: `make build` stamps `git describe`
// output, which names no version a student's go install finds.
func TestValidLabctlVersionRefusesNonReleases(t *testing.T) {
	for _, v := range []string{"v1.2.0", "v0.1.0", "latest"} {
		assert.NoError(t, classroom.ValidLabctlVersion(v), v)
	}
	for _, v := range []string{"v1.2.0-3-gabc1234", "v1.2.0-dirty", "v1.2.0-3-gabc1234-dirty", "v0.0.0-20261202070000-abcdef123456", "v1.3.0-rc.1", "dev", "1.2.0", ""} {
		assert.ErrorContains(t, classroom.ValidLabctlVersion(v), "not a release", v)
	}
}
