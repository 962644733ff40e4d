package root

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/local"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/supervise"
	"github.com/labctl/labctl/internal/testcluster"
)

func TestMain(m *testing.M) {
	supervise.MaybeRun() // deploy re-executes this binary as the operator's supervisor
	os.Exit(m.Run())
}

// The commands a user types, end to end on the local provider: up deploys
// the reference operator, status shows it, down leaves nothing behind.
func TestUpStatusDownEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	bins, err := testcluster.Binaries(context.Background())
	require.NoError(t, err)
	prov := &local.Provider{StateRoot: t.TempDir(), TiedToParent: true, Operators: deploy.AsProcess{TiedToParent: true}}
	kc := filepath.Join(t.TempDir(), "kubeconfig")

	exec := func(args ...string) (string, string, error) {
		s, out, errOut := iostreams.Test(false)
		f := &cmdutil.Factory{IOStreams: s, Version: "test", Providers: &cluster.Providers{ByName: map[string]cluster.Provider{"local": prov}}}
		cmd := NewCommand(f)
		cmd.SetArgs(args)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		err := cmd.ExecuteContext(ctx)
		return out.String(), errOut.String(), err
	}
	t.Cleanup(func() { _, _, _ = exec("down", "--name", "e2e") })

	out, errOut, err := exec("up", "--name", "e2e", "--bin-dir", bins.Dir, "--kubeconfig", kc)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "cluster e2e is ready; kubectl context labctl-e2e")
	assert.Contains(t, errOut, "Starting the manager as system:serviceaccount:postgres-operator-system:postgres-operator-controller-manager")
	cfg, err := clientcmd.LoadFromFile(kc)
	require.NoError(t, err)
	assert.Equal(t, "labctl-e2e", cfg.CurrentContext)

	out, _, err = exec("status", "--name", "e2e")
	require.NoError(t, err)
	for _, want := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "manager"} {
		assert.Contains(t, out, want+"\t")
	}

	// idempotent
	_, errOut, err = exec("up", "--name", "e2e", "--bin-dir", bins.Dir, "--kubeconfig", kc, "--no-operator")
	require.NoError(t, err)
	assert.Contains(t, errOut, `local cluster "e2e" is already running`)

	_, _, err = exec("down", "--name", "e2e")
	require.NoError(t, err)
	procs, err := proc.Find(prov.Dir("e2e"))
	require.NoError(t, err)
	assert.Empty(t, procs, "down leaves no process running")
	cfg, err = clientcmd.LoadFromFile(kc)
	require.NoError(t, err)
	assert.NotContains(t, cfg.Contexts, "labctl-e2e")
}
