package image_test

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

	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/image"
	"github.com/labctl/labctl/internal/testkind"
)

// TestLoadIntoRealKindNode runs labctl's image path for real with Docker:
// the fast build of the reference operator, `docker save`, kind's
// nodeutils.LoadImageArchive into a kind-labelled node container running a
// real containerd, found by kind's own provider; the ID the node's CRI
// reports is the one labctl expects; an unchanged rebuild loads nothing; a
// changed source loads the new image.
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

	dir := operatorCopy(t)
	tag := testkind.RandomName("labctl-test-operator:")
	t.Cleanup(func() { te.RemoveImage(t, e.LocalName(tag)) })
	build := func() *image.Image {
		t.Helper()
		start := time.Now()
		img, err := image.Build(ctx, image.BuildOptions{Engine: e, Dir: dir, Tag: tag, Mode: image.ModeFast})
		require.NoError(t, err)
		// A rebuild under the same tag leaves the old image untagged.
		t.Cleanup(func() { te.RemoveImage(t, img.ID) })
		t.Logf("built %s %s in %s", img.Ref, img.ID, time.Since(start).Round(time.Millisecond))
		return img
	}
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

	first := build()
	loaded := load(first.Ref)
	assert.Equal(t, []string{node}, loaded.LoadedInto)
	assert.Equal(t, first.Ref, loaded.Ref)
	if name == engine.Docker {
		// Docker's image ID is its config digest: what containerd reports.
		assert.Equal(t, first.ID, loaded.ID)
	}
	assert.Equal(t, loaded.ID, criID(loaded.Ref), "the node's CRI must report the ID labctl expects")

	// Unchanged sources: the same image, nothing saved or loaded.
	again := build()
	assert.Equal(t, first.ID, again.ID, "an unchanged fast build must give the same image")
	skipped := load(again.Ref)
	assert.Empty(t, skipped.LoadedInto)
	assert.Equal(t, []string{node}, skipped.Skipped)
	assert.Equal(t, loaded.ID, skipped.ID)

	// Changed sources: a new image under the same tag, loaded again.
	main := filepath.Join(dir, "cmd", "main.go")
	src, err := os.ReadFile(main)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(main, append(src, []byte("\nvar labctlTestRebuild = \""+tag+"\"\n\nfunc init() { _ = labctlTestRebuild }\n")...), 0o644))
	changed := build()
	assert.NotEqual(t, first.ID, changed.ID)
	reloaded := load(changed.Ref)
	assert.Equal(t, []string{node}, reloaded.LoadedInto)
	assert.NotEqual(t, loaded.ID, reloaded.ID)
	assert.Equal(t, reloaded.ID, criID(reloaded.Ref), "the node's CRI must report the new ID")
}

// operatorCopy copies the reference operator (its own module) into a temp
// dir, so the test can change its sources.
func operatorCopy(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("../../operator")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(src, "cmd", "main.go")); err != nil {
		t.Skipf("reference operator not found in %s", src)
	}
	dst := t.TempDir()
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), raw, 0o644)
	}))
	return dst
}
