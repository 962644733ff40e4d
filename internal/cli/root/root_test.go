package root

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/userr"
)

// fakeProvider records calls; unit tests may fake providers.
type fakeProvider struct {
	name  string
	upped []string
}

func (f *fakeProvider) Name() string { return f.name }
func (f *fakeProvider) Up(_ context.Context, o cluster.UpOptions) (*cluster.Cluster, error) {
	f.upped = append(f.upped, o.Name)
	return &cluster.Cluster{Name: o.Name, Provider: f.name, Context: "ctx-" + o.Name, Kubeconfig: "/k"}, nil
}
func (f *fakeProvider) Get(context.Context, string) (*cluster.Cluster, error) {
	return nil, cluster.ErrNotFound
}
func (f *fakeProvider) Down(context.Context, string) error { return nil }
func (f *fakeProvider) Status(context.Context, string) (*cluster.Health, error) {
	return nil, cluster.ErrNotFound
}

func run(t *testing.T, tty bool, args ...string) (*fakeProvider, string, string, error) {
	s, out, errOut := iostreams.Test(tty)
	p := &fakeProvider{name: "local"}
	f := &cmdutil.Factory{IOStreams: s, Version: "test", Providers: &cluster.Providers{ByName: map[string]cluster.Provider{"local": p}}}
	cmd := NewCommand(f)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	err := cmd.ExecuteContext(context.Background())
	return p, out.String(), errOut.String(), err
}

func TestUnknownProviderIsAUsageError(t *testing.T) {
	_, _, _, err := run(t, false, "up", "--provider", "vagrant")
	require.Error(t, err)
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	assert.Equal(t, `unknown provider "vagrant": use one of: auto, local`, userr.Message(err))
}

func TestUpUsesTheNamedCluster(t *testing.T) {
	p, out, _, err := run(t, false, "up", "--provider", "local", "--name", "lab1", "--no-operator")
	require.NoError(t, err)
	assert.Equal(t, []string{"lab1"}, p.upped)
	assert.Contains(t, out, "cluster lab1 is ready; kubectl context ctx-lab1")
	assert.NotContains(t, out, "\x1b[", "no colour when not a terminal")
}

func TestUpProjectAndNoOperatorConflict(t *testing.T) {
	_, _, _, err := run(t, false, "up", "--project", "x", "--no-operator")
	require.Error(t, err)
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	assert.Equal(t, "--no-operator and --project cannot be used together: see `labctl up --help`", userr.Message(err))
}

func TestDownOfAMissingClusterSucceedsAndSaysSo(t *testing.T) {
	_, _, errOut, err := run(t, false, "down", "--name", "ghost")
	require.NoError(t, err, "like kind delete cluster, deleting what is not there succeeds")
	assert.Contains(t, errOut, `No cluster named "ghost": nothing to delete`)
}

func TestStatusWithNoClusters(t *testing.T) {
	_, out, _, err := run(t, false, "status")
	require.NoError(t, err)
	assert.Contains(t, out, "No clusters. Run `labctl up` to create one.")
}

func TestVersion(t *testing.T) {
	_, out, _, err := run(t, false, "version")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "labctl test"))
	assert.Contains(t, out, "kubernetes v1.37.2")
}

func TestVersionFlagAndStructuredVersion(t *testing.T) {
	_, out, _, err := run(t, false, "--version")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "labctl test ("), out)

	_, out, _, err = run(t, false, "version", "-o", "json")
	require.NoError(t, err)
	var info map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &info), out)
	assert.Equal(t, "test", info["labctl"])
	assert.Equal(t, "v1.37.2", info["kubernetes"])

	_, out, _, err = run(t, false, "version", "-o", "yaml")
	require.NoError(t, err)
	assert.Contains(t, out, "labctl: test\n")

	_, _, _, err = run(t, false, "version", "-o", "xml")
	require.Error(t, err)
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
}

func TestCompletionIsAvailable(t *testing.T) {
	_, out, _, err := run(t, false, "completion", "bash")
	require.NoError(t, err)
	assert.Contains(t, out, "bash completion")
}

func TestColourOnATerminalAndOffWithNoColor(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	_, out, _, err := run(t, true, "up", "--provider", "local", "--no-operator")
	require.NoError(t, err)
	assert.Contains(t, out, "\x1b[", "styled on a terminal")

	_, out, _, err = run(t, true, "--no-color", "up", "--provider", "local", "--no-operator")
	require.NoError(t, err)
	assert.NotContains(t, out, "\x1b[")
}

type failingProvider struct{ fakeProvider }

func (f *failingProvider) Up(context.Context, cluster.UpOptions) (*cluster.Cluster, error) {
	return nil, userr.New("podman cannot pull kindest/node", "check the network")
}

func TestAutoFallsBackToLocalWhenKindCannotStart(t *testing.T) {
	s, out, errOut := iostreams.Test(false)
	kind := &failingProvider{fakeProvider{name: "kind"}}
	loc := &fakeProvider{name: "local"}
	f := &cmdutil.Factory{IOStreams: s, Version: "test", Providers: &cluster.Providers{
		ByName:   map[string]cluster.Provider{"kind": kind, "local": loc},
		Detect:   func(context.Context) (string, string) { return "kind", "podman is running" },
		Fallback: "local",
	}}
	cmd := NewCommand(f)
	cmd.SetArgs([]string{"up", "--no-operator"})
	require.NoError(t, cmd.ExecuteContext(context.Background()))
	assert.Equal(t, []string{cluster.DefaultName}, loc.upped)
	assert.Contains(t, errOut.String(), "kind did not work: podman cannot pull kindest/node: check the network\nUsing the local provider instead.")
	assert.Contains(t, out.String(), "is ready")

	// an explicit --provider kind does not fall back
	cmd = NewCommand(f)
	cmd.SetArgs([]string{"up", "--provider", "kind", "--no-operator"})
	require.Error(t, cmd.ExecuteContext(context.Background()))
}

func TestCompletionOfLabsAndTasks(t *testing.T) {
	_, out, _, err := run(t, false, "__complete", "verify", "lab-8")
	require.NoError(t, err)
	assert.Contains(t, out, "lab-8.2")
	_, out, _, err = run(t, false, "__complete", "verify", "lab-8.2", "--task", "")
	require.NoError(t, err)
	assert.Contains(t, out, "3.2\tThe Database reads the condition, not the phase")
	_, out, _, err = run(t, false, "__complete", "solution", "")
	require.NoError(t, err)
	assert.Contains(t, out, "lab-3.4")
	_, out, _, err = run(t, false, "__complete", "up", "--lab", "")
	require.NoError(t, err)
	assert.Contains(t, out, "lab-2.4")
}

func TestKubeconfigFlagIsKubectls(t *testing.T) {
	t.Setenv("KUBECONFIG", "/elsewhere")
	dir := t.TempDir()
	_, _, _, err := run(t, false, "status", "--kubeconfig", filepath.Join(dir, "kc"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "kc"), os.Getenv("KUBECONFIG"), "every command reads the file named by --kubeconfig")
}
