package existing_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/existing"
	"github.com/labctl/labctl/internal/userr"
)

// apiServer answers /version like a kube-apiserver.
func apiServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// kubeconfig writes a kubeconfig with the given context → server pairs.
func kubeconfig(t *testing.T, current string, servers map[string]string) string {
	cfg := clientcmdapi.NewConfig()
	for name, server := range servers {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "t"}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	cfg.CurrentContext = current
	p := filepath.Join(t.TempDir(), "config")
	require.NoError(t, clientcmd.WriteToFile(*cfg, p))
	return p
}

func TestUpUsesTheCurrentContext(t *testing.T) {
	kc := kubeconfig(t, "minikube", map[string]string{"minikube": apiServer(t), "other": "https://127.0.0.1:1"})
	p := &existing.Provider{}
	c, err := p.Up(context.Background(), cluster.UpOptions{Name: cluster.DefaultName, KubeconfigPath: kc})
	require.NoError(t, err)
	assert.Equal(t, "minikube", c.Context)
	assert.Equal(t, "existing", c.Provider)
	assert.True(t, c.Reused)
	assert.True(t, c.Env.RealPods)
	assert.Nil(t, c.Env.AuditLog, "no audit log for clusters labctl does not own")
	assert.Empty(t, c.Env.StateDir)
	assert.Equal(t, kc, c.Kubeconfig)
}

func TestContextFlagAndName(t *testing.T) {
	srv := apiServer(t)
	kc := kubeconfig(t, "other", map[string]string{"prod": srv, "other": "https://127.0.0.1:1"})
	t.Setenv("KUBECONFIG", kc)
	ctx := context.Background()

	// --context selects, whatever the cluster name.
	p := &existing.Provider{Context: "prod"}
	c, err := p.Get(ctx, cluster.DefaultName)
	require.NoError(t, err)
	assert.Equal(t, "prod", c.Context)

	// Without --context, a name that is a context selects it...
	c, err = (&existing.Provider{}).Get(ctx, "prod")
	require.NoError(t, err)
	assert.Equal(t, "prod", c.Context)

	// ...and any other name is not this provider's: "not found", so
	// commands that try every provider move on.
	_, err = (&existing.Provider{}).Get(ctx, cluster.DefaultName)
	assert.True(t, errors.Is(err, cluster.ErrNotFound))
	_, err = (&existing.Provider{}).Status(ctx, cluster.DefaultName)
	assert.True(t, errors.Is(err, cluster.ErrNotFound))
	err = (&existing.Provider{}).Down(ctx, cluster.DefaultName)
	assert.True(t, errors.Is(err, cluster.ErrNotFound))

	st, err := p.Status(ctx, "x")
	require.NoError(t, err)
	assert.True(t, st.Running)
	assert.Equal(t, "v1.37.2", st.Components[0].Detail)
}

func TestDownRefuses(t *testing.T) {
	kc := kubeconfig(t, "prod", map[string]string{"prod": apiServer(t)})
	p := &existing.Provider{Kubeconfig: kc, Context: "prod"}
	err := p.Down(context.Background(), cluster.DefaultName)
	require.Error(t, err)
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	assert.Contains(t, userr.Message(err), `labctl does not delete clusters it did not create (context "prod"`)
	assert.Contains(t, userr.Message(err), "labctl reset")
}

func TestUpErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("unreachable", func(t *testing.T) {
		kc := kubeconfig(t, "dead", map[string]string{"dead": "https://127.0.0.1:1"})
		_, err := (&existing.Provider{}).Up(ctx, cluster.UpOptions{KubeconfigPath: kc})
		require.Error(t, err)
		assert.Equal(t, userr.ExitEnvironment, userr.Code(err))
		msg := userr.Message(err)
		assert.NotContains(t, msg, "\n")
		assert.Contains(t, msg, `context "dead" (https://127.0.0.1:1) does not answer`)
		assert.Contains(t, msg, "--context")
	})
	t.Run("unknown --context", func(t *testing.T) {
		kc := kubeconfig(t, "a", map[string]string{"a": "https://127.0.0.1:1"})
		_, err := (&existing.Provider{Context: "b"}).Up(ctx, cluster.UpOptions{KubeconfigPath: kc})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), `your kubeconfig has no context "b"`)
	})
	t.Run("no current context", func(t *testing.T) {
		kc := kubeconfig(t, "", map[string]string{"a": "https://127.0.0.1:1"})
		_, err := (&existing.Provider{}).Up(ctx, cluster.UpOptions{KubeconfigPath: kc})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "no current context")
		assert.Contains(t, userr.Message(err), "--context")
	})
	t.Run("unreadable kubeconfig", func(t *testing.T) {
		kc := filepath.Join(t.TempDir(), "config")
		require.NoError(t, os.WriteFile(kc, []byte("{not yaml"), 0o600))
		_, err := (&existing.Provider{}).Up(ctx, cluster.UpOptions{KubeconfigPath: kc})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "cannot read your kubeconfig")
	})
}
