//go:build linux

package render_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/render"
	"github.com/labctl/labctl/internal/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.MaybeRun()
	render.MaybeRun()
	os.Exit(m.Run())
}

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n"

// kustomization writes a project whose config/default holds files, as a
// box's private copy, and returns the box and config/default's path.
func kustomization(t *testing.T, files map[string]string) (*sandbox.Box, string) {
	t.Helper()
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip(sup.Reason)
	}
	root := t.TempDir()
	box, err := sandbox.NewBox(filepath.Join(root, "box"), sandbox.UIDFor(root), nil)
	require.NoError(t, err)
	dir := filepath.Join(box.Src(), "config", "default")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return box, dir
}

// The submission's own files render in its box as they do outside it.
func TestBoxedRendersTheProjectsFiles(t *testing.T) {
	box, dir := kustomization(t, map[string]string{
		"kustomization.yaml": "namePrefix: p-\nresources:\n- cm.yaml\n",
		"cm.yaml":            strings.ReplaceAll(configMap, "%s", "settings"),
	})
	want, err := render.Kustomize(dir)
	require.NoError(t, err)
	got, err := render.Boxed(context.Background(), box, dir)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	assert.Contains(t, string(got), "name: p-settings")
}

// A resource URL is not fetched, not even from the box's loopback: the
// request never arrives, and the kustomization fails as the project's.
func TestBoxedFetchesNoURL(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(strings.ReplaceAll(configMap, "%s", "forged")))
	}))
	defer srv.Close()
	box, dir := kustomization(t, map[string]string{"kustomization.yaml": "resources:\n- " + srv.URL + "/cm.yaml\n"})

	_, err := render.Kustomize(dir)
	require.NoError(t, err, "unboxed, kustomize fetches it (the attack works outside the box)")
	require.EqualValues(t, 1, hits.Load())

	_, err = render.Boxed(context.Background(), box, dir)
	var build *render.BuildError
	require.ErrorAs(t, err, &build)
	assert.EqualValues(t, 1, hits.Load(), "the box sent no request")
}

// A file:// git repository elsewhere on the machine is not cloned.
func TestBoxedClonesNoRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	other := t.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = other
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=x", "GIT_AUTHOR_EMAIL=x@x", "GIT_COMMITTER_NAME=x", "GIT_COMMITTER_EMAIL=x@x")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	git("init", "--quiet", "--initial-branch=main")
	require.NoError(t, os.WriteFile(filepath.Join(other, "kustomization.yaml"), []byte("resources:\n- cm.yaml\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(other, "cm.yaml"), []byte(strings.ReplaceAll(configMap, "%s", "another-students-secret")), 0o644))
	git("add", "-A")
	git("commit", "--quiet", "-m", "x")
	box, dir := kustomization(t, map[string]string{"kustomization.yaml": "resources:\n- file://" + other + "?ref=main\n"})

	out, err := render.Kustomize(dir)
	require.NoError(t, err, "unboxed, kustomize clones it")
	require.Contains(t, string(out), "another-students-secret")

	out, err = render.Boxed(context.Background(), box, dir)
	var build *render.BuildError
	require.ErrorAs(t, err, &build)
	assert.NotContains(t, string(out)+err.Error(), "another-students-secret")
}

// The render runs as the box's user: a file only root may read stays
// unread, however the kustomization names it.
func TestBoxedReadsAsTheBoxsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	box, dir := kustomization(t, map[string]string{
		"kustomization.yaml": "resources:\n- cm.yaml\n",
		"cm.yaml":            strings.ReplaceAll(configMap, "%s", "root-only"),
	})
	require.NoError(t, os.Chmod(filepath.Join(dir, "cm.yaml"), 0o600))

	_, err := render.Boxed(context.Background(), box, dir)
	var build *render.BuildError
	require.ErrorAs(t, err, &build)
	assert.Contains(t, err.Error(), "permission denied")
}

// A caller's cancellation is not the project's fault.
func TestBoxedStopsWithItsCaller(t *testing.T) {
	box, dir := kustomization(t, map[string]string{"kustomization.yaml": "resources: []\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := render.Boxed(ctx, box, dir)
	require.Error(t, err)
	var build *render.BuildError
	assert.False(t, errors.As(err, &build), "%v", err)
}
