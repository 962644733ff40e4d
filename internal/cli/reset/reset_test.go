package reset

import (
	"context"
	"errors"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/local"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/testcluster"
	"github.com/labctl/labctl/internal/userr"
)

var env *testcluster.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // tests needing the cluster skip themselves
	}
	testcluster.Main(m, &env)
}

func needCluster(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("needs the local cluster (not in -short)")
	}
}

// options returns reset options for the shared test cluster.
func options(t *testing.T, args ...string) (*Options, *iostreams.IOStreams, func() string) {
	t.Helper()
	s, out, errOut := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{ByName: map[string]cluster.Provider{local.ProviderName: env.Provider}}}
	var got *Options
	cmd := NewCommand(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs(append([]string{"--name", env.Name, "--provider", "local"}, args...))
	require.NoError(t, cmd.Execute())
	return got, s, func() string { return out.String() + errOut.String() }
}

func TestResetMissingCluster(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	empty := &local.Provider{StateRoot: t.TempDir()}
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{ByName: map[string]cluster.Provider{local.ProviderName: empty}}}
	for _, provider := range []string{"auto", "local"} {
		err := Run(context.Background(), &Options{f: f, Provider: provider, Name: "nope", Namespace: "default"})
		require.Error(t, err, provider)
		msg := userr.Message(err)
		assert.NotContains(t, msg, "\n")
		assert.Contains(t, msg, `"nope"`)
		assert.Contains(t, msg, "labctl up")
		assert.Equal(t, userr.ExitFailure, userr.Code(err))
	}
}

func TestFlags(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{}}
	var got *Options
	cmd := NewCommand(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{})
	require.NoError(t, cmd.Execute())
	assert.Equal(t, "default", got.Namespace)
	assert.Equal(t, cluster.DefaultName, got.Name)
	assert.False(t, got.AllNamespaces || got.Force || got.Operator || got.Cluster)

	cmd = NewCommand(f, func(context.Context, *Options) error { return nil })
	cmd.SetArgs([]string{"--cluster", "--force"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	assert.Error(t, cmd.Execute(), "--cluster with --force makes no sense")
}

func TestResetOperator(t *testing.T) {
	needCluster(t)
	o, _, out := options(t, "-n", "default", "--operator", "--project", "/src/op")
	runner := &recordingRunner{}
	o.f.Providers.ByName[local.ProviderName] = &withRunner{Provider: env.Provider, runner: runner}
	require.NoError(t, Run(context.Background(), o), out())
	assert.Equal(t, "/src/op", runner.dir)
	require.NotNil(t, runner.cluster)
	assert.Equal(t, env.Name, runner.cluster.Name)
	assert.Contains(t, out(), "operator redeployed")

	runner.err = userr.New("build failed", "fix it")
	err := Run(context.Background(), o)
	assert.EqualError(t, err, "build failed: fix it")
}

// recordingRunner records where it was asked to run an operator.
type recordingRunner struct {
	cluster *cluster.Cluster
	dir     string
	err     error
}

func (r *recordingRunner) Run(_ context.Context, c *cluster.Cluster, dir string, _ cluster.RunOptions) (*operator.Operator, error) {
	r.cluster, r.dir = c, dir
	return &operator.Operator{}, r.err
}
func (r *recordingRunner) Current(context.Context, *cluster.Cluster, string, string) (*operator.Operator, error) {
	return nil, errors.New("not running")
}
func (r *recordingRunner) Stop(context.Context, *cluster.Cluster) error { return nil }

// withRunner hands the clusters of a provider another operator runner.
type withRunner struct {
	cluster.Provider
	runner cluster.OperatorRunner
}

func (p *withRunner) Get(ctx context.Context, name string) (*cluster.Cluster, error) {
	c, err := p.Provider.Get(ctx, name)
	if c != nil {
		c.Operators = p.runner
	}
	return c, err
}

// recordingProvider answers Get with a cluster and records Down and Up.
type recordingProvider struct {
	calls  []string
	down   error
	runner cluster.OperatorRunner
}

func (p *recordingProvider) Name() string { return "kind" }
func (p *recordingProvider) Up(_ context.Context, o cluster.UpOptions) (*cluster.Cluster, error) {
	p.calls = append(p.calls, "up "+o.Name)
	return &cluster.Cluster{Name: o.Name, Provider: "kind", Context: "kind-" + o.Name, Operators: p.runner}, nil
}
func (p *recordingProvider) Get(_ context.Context, name string) (*cluster.Cluster, error) {
	if name != "course" {
		return nil, cluster.ErrNotFound
	}
	return &cluster.Cluster{Name: name, Provider: "kind"}, nil
}
func (p *recordingProvider) Down(_ context.Context, name string) error {
	p.calls = append(p.calls, "down "+name)
	return p.down
}
func (p *recordingProvider) Status(context.Context, string) (*cluster.Health, error) {
	return nil, cluster.ErrNotFound
}

func TestResetCluster(t *testing.T) {
	s, out, _ := iostreams.Test(false)
	runner := &recordingRunner{}
	prov := &recordingProvider{runner: runner}
	f := &cmdutil.Factory{IOStreams: s, Providers: &cluster.Providers{ByName: map[string]cluster.Provider{"kind": prov}}}
	require.NoError(t, Run(context.Background(), &Options{f: f, Provider: "kind", Name: "course", Cluster: true}))
	assert.Equal(t, []string{"down course", "up course"}, prov.calls)
	require.NotNil(t, runner.cluster, "the operator is deployed onto the new cluster")
	assert.Equal(t, "kind-course", runner.cluster.Context)
	assert.Contains(t, out.String(), "kind cluster course recreated")

	prov.calls, prov.down = nil, userr.Usage("labctl does not delete clusters it did not create", "…")
	err := Run(context.Background(), &Options{f: f, Provider: "kind", Name: "course", Cluster: true})
	require.Error(t, err)
	assert.Equal(t, []string{"down course"}, prov.calls, "not recreated when deletion fails")

	err = Run(context.Background(), &Options{f: f, Provider: "kind", Name: "missing", Cluster: true})
	require.Error(t, err)
	assert.True(t, errors.Is(err, cluster.ErrNotFound))
	assert.Contains(t, userr.Message(err), `there is no running cluster named "missing" to reset`)
}
