package controlplane

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKubeadmIsBuiltAtThePinnedVersion builds (or finds cached) upstream's
// kubeadm and checks it reports the control plane's version.
func TestKubeadmIsBuiltAtThePinnedVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kubeadm from k8s.io/kubernetes (minutes when Go's cache is cold); run without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	started := time.Now()
	bin, err := Kubeadm(ctx, Options{Progress: func(f string, a ...any) { t.Logf(f, a...) }})
	require.NoError(t, err)
	t.Logf("kubeadm ready in %s: %s", time.Since(started).Round(time.Second), bin)
	out, err := exec.CommandContext(ctx, bin, "version", "-o", "short").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, DefaultVersions().Kubernetes, strings.TrimSpace(string(out)))
}
