package checks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/report"
)

const workflowWith = `{"tests":"./test/integration","uninstalled":{"name":"cert-manager","why":"install it first"}}`

// workflowProject is a project whose one workflow is the course-like
// one, changed by edit (old → new pairs).
func workflowProject(t *testing.T, makefile string, edit ...string) *Context {
	t.Helper()
	data, err := os.ReadFile("testdata/workflows/course-like.yml")
	require.NoError(t, err)
	text := string(data)
	for i := 0; i+1 < len(edit); i += 2 {
		require.Contains(t, text, edit[i])
		text = strings.Replace(text, edit[i], edit[i+1], 1)
	}
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".github", "workflows"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".github", "workflows", "integration-tests.yml"), []byte(text), 0o644))
	if makefile != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "Makefile"), []byte(makefile), 0o644))
	}
	return projectContext(dir)
}

const kubebuilderMakefile = "IMG ?= controller:latest\n\n.PHONY: docker-build\ndocker-build: ## Build docker image with the manager.\n\t$(CONTAINER_TOOL) build -t ${IMG} .\n\ntest-integration:\n\tgo test ./test/integration/... -v\n"

// The workflow is read for what its steps do: the lab's own passes (the
// wait for cert-manager nothing installs is the course's mistake, so it
// warns), other correct shapes pass, and each mistake fails.
func TestCIWorkflow(t *testing.T) {
	cases := []struct {
		name   string
		edit   []string
		status report.Result
		says   string
	}{
		{"the lab's workflow", nil, report.Warn, "waits for cert-manager, which nothing in it installs"},
		{"cert-manager installed first", []string{"run: make deploy IMG=${{ env.IMG }}", "run: |\n          kubectl apply -f https://github.com/cert-manager/cert-manager/releases/download/v1.19.1/cert-manager.yaml\n          make deploy IMG=${{ env.IMG }}"}, report.Pass, "runs the integration tests (step 11)"},
		{"docker build, kustomize and go test", []string{
			"run: make docker-build IMG=${{ env.IMG }}", "run: docker build --tag $IMG .",
			"run: make deploy IMG=${{ env.IMG }}", "run: kustomize build config/default | kubectl apply -f -",
			"ginkgo -v ./test/integration", "go test ./test/integration/... -v"}, report.Warn, "deploys the operator (step 8)"},
		{"a make target runs the tests", []string{"ginkgo -v ./test/integration", "make test-integration"}, report.Warn, "runs the integration tests"},
		{"helm's kind action", []string{"run: kind create cluster --image kindest/node:v1.32.0 --wait 60s", "uses: helm/kind-action@v1\n        with:\n          cluster_name: kind"}, report.Warn, "creates a kind cluster (step 5)"},
		{"on pull requests only", []string{"on: [push, pull_request]", "on:\n  pull_request:\n    branches: [main]"}, report.Warn, ""},

		{"no tests run", []string{"ginkgo -v ./test/integration", "echo done"}, report.Fail, "stops there"},
		{"the unit tests instead", []string{"ginkgo -v ./test/integration", "go test ./internal/controller/..."}, report.Fail, "runs the integration tests"},
		{"the image never loaded", []string{"run: kind load docker-image ${{ env.IMG }}", "run: echo loaded"}, report.Fail, "loads the image into the kind cluster"},
		{"loaded before it is built", []string{
			"      - name: Build Docker image\n        run: make docker-build IMG=${{ env.IMG }}\n      - name: Load image into kind\n        run: kind load docker-image ${{ env.IMG }}\n",
			"      - name: Load image into kind\n        run: kind load docker-image ${{ env.IMG }}\n      - name: Build Docker image\n        run: make docker-build IMG=${{ env.IMG }}\n"}, report.Fail, "loads the image into the kind cluster"},
		{"tests before the deploy", []string{
			"      - name: Run integration tests\n        run: |\n          ginkgo -v ./test/integration\n", "",
			"      - name: Deploy operator\n", "      - run: ginkgo -v ./test/integration\n      - name: Deploy operator\n"}, report.Fail, "runs the integration tests"},
		{"another image loaded", []string{"run: kind load docker-image ${{ env.IMG }}", "run: kind load docker-image postgres-operator:latest"}, report.Fail, "builds the image postgres-operator:ci but loads postgres-operator:latest"},
		{"make's default image built", []string{"env:\n  IMG: postgres-operator:ci\n", "", "run: make docker-build IMG=${{ env.IMG }}", "run: make docker-build",
			"run: kind load docker-image ${{ env.IMG }}", "run: kind load docker-image postgres-operator:ci"}, report.Fail, "builds the image controller:latest"},
		{"make reads IMG from the environment", []string{"run: make docker-build IMG=${{ env.IMG }}", "run: make docker-build"}, report.Warn, "builds the operator's image"},
		{"another cluster named", []string{"run: kind load docker-image ${{ env.IMG }}", "run: kind load docker-image ${{ env.IMG }} --name k8s-operators-course"}, report.Fail, `loads the image into "k8s-operators-course"`},
		{"helm's kind action's own name", []string{"run: kind create cluster --image kindest/node:v1.32.0 --wait 60s", "uses: helm/kind-action@v1"}, report.Fail, `creates the kind cluster "chart-testing"`},
		{"manual runs only", []string{"on: [push, pull_request]", "on: workflow_dispatch"}, report.Fail, "neither on push nor on pull_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := runCheck(t, workflowProject(t, kubebuilderMakefile, tc.edit...), "ci-workflow", workflowWith)
			assert.Equal(t, tc.status, out.Status, out.Message)
			assert.Contains(t, out.Message, tc.says)
		})
	}
	t.Run("the reference operator's", func(t *testing.T) {
		out := runCheck(t, projectContext(filepath.Join("..", "..", "operator")), "ci-workflow", workflowWith)
		assert.Equal(t, report.Pass, out.Status, out.Message)
	})
	t.Run("no workflow", func(t *testing.T) {
		out := runCheck(t, projectContext(t.TempDir()), "ci-workflow", workflowWith)
		assert.Equal(t, report.Fail, out.Status, out.Message)
		assert.Contains(t, out.Message, ".github/workflows has no workflow")
	})
}
