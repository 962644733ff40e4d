package image_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/image"
	"github.com/labctl/labctl/internal/testkind"
)

// TestLoadIntoRealKindNode runs labctl's image path for real with Docker:
// the fast build of the reference operator, `docker save`, kind's
// nodeutils.LoadImageArchive into a kind-labelled node container running a
// real containerd, found by kind's own provider; the ID the node's CRI
// reports is the one labctl expects; loading it again loads nothing.
func TestLoadIntoRealKindNode(t *testing.T) { loadIntoRealKindNode(t, engine.Docker) }

// TestLoadIntoRealKindNodePodman is the same with Podman.
func TestLoadIntoRealKindNodePodman(t *testing.T) { loadIntoRealKindNode(t, engine.Podman) }

func loadIntoRealKindNode(t *testing.T, name string) {
	te := testkind.Setup(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	nodeImage := te.NodeImage(t, ctx, testkind.DefaultVersions())
	te.AllowPrivileged(t, ctx, nodeImage)
	clusterName := testkind.RandomName("labctl-t")
	node := te.StartNode(t, ctx, nodeImage, clusterName)

	// labctl's kind provider lists the node through kind's own provider.
	prov := &kind.Provider{Engine: name, StateRoot: t.TempDir()}
	e, nodes, err := prov.Nodes(ctx, clusterName)
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	assert.Equal(t, node, nodes[0].String())

	dir, err := filepath.Abs("../../operator")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "cmd", "main.go")); err != nil {
		t.Skipf("reference operator not found in %s", dir)
	}
	tag := testkind.RandomName("labctl-test-operator:")
	t.Cleanup(func() { te.RemoveImage(t, e.LocalName(tag)) })
	start := time.Now()
	first, err := image.Build(ctx, image.BuildOptions{Engine: e, Dir: dir, Tag: tag, Mode: image.ModeFast})
	require.NoError(t, err)
	t.Logf("built %s %s in %s", first.Ref, first.ID, time.Since(start).Round(time.Millisecond))
	load := func(ref string) *image.Loaded {
		t.Helper()
		start := time.Now()
		l, err := image.Load(ctx, image.LoadOptions{Engine: e, Nodes: nodes, Ref: ref})
		require.NoError(t, err)
		t.Logf("load: into %v, skipped %v in %s", l.LoadedInto, l.Skipped, time.Since(start).Round(time.Millisecond))
		return l
	}
	criID := func(ref string) string {
		t.Helper()
		id, err := te.CRIImageID(ctx, node, image.Normalize(ref))
		require.NoError(t, err)
		return id
	}

	loaded := load(first.Ref)
	assert.Equal(t, []string{node}, loaded.LoadedInto)
	assert.Equal(t, first.Ref, loaded.Ref)
	if name == engine.Docker {
		// Docker's image ID is its config digest: what containerd reports.
		assert.Equal(t, first.ID, loaded.ID)
	}
	assert.Equal(t, loaded.ID, criID(loaded.Ref), "the node's CRI must report the ID labctl expects")

	// The same image again: nothing saved or loaded. (Rebuilds, changed
	// sources and the rollout restart: deploy's TestToKindForReal.)
	skipped := load(first.Ref)
	assert.Empty(t, skipped.LoadedInto)
	assert.Equal(t, []string{node}, skipped.Skipped)
	assert.Equal(t, loaded.ID, skipped.ID)
}
