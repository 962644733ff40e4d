package deploy_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/image"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/testkind"
)

// TestToKindForReal is `labctl up`'s operator deploy on kind with real
// parts: the reference operator built the fast way by Docker, saved and
// loaded by kind's nodeutils into a kind node container running a real
// containerd (testkind), found by kind's own provider; the node's CRI
// (crictl) reports the image ID labctl recorded; then it is applied to a
// real API server (the local control plane stands in for the node's, which
// testkind's node does not run) and rolled out. An unchanged second deploy loads nothing and restarts
// nothing; a changed source is loaded again and restarts the rollout.
func TestToKindForReal(t *testing.T) { toKindForReal(t, engine.Docker) }

// TestToKindForRealPodman is the same with Podman.
func TestToKindForRealPodman(t *testing.T) { toKindForReal(t, engine.Podman) }

func toKindForReal(t *testing.T, name string) {
	te := testkind.Setup(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	nodeImage := te.NodeImage(t, ctx, testkind.DefaultVersions())
	te.AllowPrivileged(t, ctx, nodeImage)
	clusterName := testkind.RandomName("labctl-t")
	node := te.StartNode(t, ctx, nodeImage, clusterName)

	prefix := "tokind-" + name
	p := projectWithSources(t, prefix)
	ns, dep := prefix+"-system", prefix+"-controller-manager"
	prov := &kind.Provider{Engine: name, StateRoot: t.TempDir()}
	c := &cluster.Cluster{Name: clusterName, Provider: kind.ProviderName, Config: env.Config}
	tag := testkind.RandomName("labctl-test-operator:")
	ref := engine.New(name, nil).LocalName(tag)
	s, _, errOut := iostreams.Test(false)
	toKind := func() (log string) {
		t.Helper()
		before := errOut.Len()
		start := time.Now()
		_, err := deploy.ToKind(ctx, c, p, deploy.KindOptions{Streams: s, Provider: prov, Tag: tag, Mode: image.ModeFast, Timeout: 3 * time.Minute})
		require.NoError(t, err, errOut.String())
		log = errOut.String()[before:]
		t.Logf("deploy in %s:\n%s", time.Since(start).Round(time.Millisecond), log)
		id := getDeployment(t, ns, dep).Annotations[deploy.ImageIDAnnotation]
		// A rebuild under the same tag leaves the old image untagged.
		t.Cleanup(func() { te.RemoveImage(t, id) })
		return log
	}
	criID := func() string {
		t.Helper()
		id, err := te.CRIImageID(ctx, node, image.Normalize(ref))
		require.NoError(t, err)
		return id
	}

	log := toKind()
	assert.Contains(t, log, "✓ Loading "+ref+" into 1 node(s)")
	d := getDeployment(t, ns, dep)
	assert.Equal(t, ref, d.Spec.Template.Spec.Containers[0].Image, "the name the node has")
	first := d.Annotations[deploy.ImageIDAnnotation]
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, first)
	assert.Equal(t, first, criID(), "the node's CRI has the image the Deployment was told about")
	if name == engine.Docker {
		// Docker's image ID is the config digest containerd reports.
		built, err := engine.New(name, nil).ImageID(ctx, ref)
		require.NoError(t, err)
		assert.Equal(t, built, first)
	}
	assert.Equal(t, "1", revision(d))
	assert.True(t, available(d))

	// Unchanged sources: nothing loaded, nothing restarted.
	log = toKind()
	assert.Contains(t, log, "- Loading "+ref+" into 1 node(s) — already on every node")
	d = getDeployment(t, ns, dep)
	assert.Equal(t, first, d.Annotations[deploy.ImageIDAnnotation])
	assert.Equal(t, "1", revision(d))
	assert.Empty(t, d.Spec.Template.Annotations[deploy.RestartedAtAnnotation])

	// Changed sources: the new image is loaded and the rollout restarted.
	main := filepath.Join(p.Dir, "cmd", "main.go")
	src, err := os.ReadFile(main)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(main, append(src, []byte("\nvar labctlTestRebuild = \""+tag+"\"\n\nfunc init() { _ = labctlTestRebuild }\n")...), 0o644))
	log = toKind()
	assert.Contains(t, log, "✓ Loading "+ref+" into 1 node(s)")
	assert.Contains(t, log, "restarting the rollout of "+ns+"/"+dep)
	d = getDeployment(t, ns, dep)
	second := d.Annotations[deploy.ImageIDAnnotation]
	assert.NotEqual(t, first, second)
	assert.Equal(t, second, criID(), "the node's CRI has the new image")
	assert.NotEmpty(t, d.Spec.Template.Annotations[deploy.RestartedAtAnnotation])
	assert.Equal(t, "2", revision(d))
	assert.True(t, available(d))
}

// projectWithSources is inClusterProject plus the reference operator's Go
// sources, so it can be built.
func projectWithSources(t *testing.T, prefix string) *deploy.Project {
	t.Helper()
	p := inClusterProject(t, prefix)
	ref, err := deploy.ResolveProject("")
	require.NoError(t, err)
	require.NoError(t, filepath.WalkDir(ref.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ref.Dir, path)
		if d.IsDir() {
			if rel == "config" || (rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin")) {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(p.Dir, rel), 0o755)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(p.Dir, rel), raw, 0o644)
	}))
	return p
}
