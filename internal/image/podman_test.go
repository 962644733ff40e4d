package image_test

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/engine/enginetest"
	"github.com/labctl/labctl/internal/image"
)

// TestPodmanFastBuildReal builds the reference operator's fast-mode image
// with the real Podman and Go, saves it as a Docker archive and checks what
// kind's nodes would import: manifest.json with the localhost/ tag, a
// config running /manager as 65532, and a layer holding /manager.
func TestPodmanFastBuildReal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the reference operator: not in -short")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed (apt-get install podman): skipping the real image build")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if p := engine.ProbeEngine(ctx, engine.OSRunner{}, engine.Podman); !p.Usable() {
		t.Skipf("podman does not work here: %v", p.Err)
	}
	dir, err := filepath.Abs("../../operator")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "cmd", "main.go")); err != nil {
		t.Skipf("reference operator not found in %s", dir)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := "labctl-test-operator:" + hex.EncodeToString(b)
	e := engine.New(engine.Podman, nil)
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "-f", "localhost/"+tag).Run() })

	img, err := image.Build(ctx, image.BuildOptions{Engine: e, Dir: dir, Tag: tag, Mode: image.ModeFast})
	if err != nil {
		var lt *image.LogTail
		if errors.As(err, &lt) {
			t.Logf("log tail: %q", lt.Lines)
		}
		require.NoError(t, err)
	}
	assert.Equal(t, "localhost/"+tag, img.Ref)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, img.ID)

	archive := filepath.Join(t.TempDir(), "image.tar")
	out, err := os.Create(archive)
	require.NoError(t, err)
	require.NoError(t, e.Save(ctx, img.Ref, out))
	require.NoError(t, out.Close())
	a, err := image.ReadArchive(archive)
	require.NoError(t, err)
	require.True(t, a.HasFile("manifest.json"))
	entry, ok := a.Find(img.Ref)
	require.True(t, ok, "archive tags: %+v", a.Entries)
	assert.Equal(t, []string{"localhost/" + tag}, entry.RepoTags)
	require.Len(t, entry.Layers, 1, "FROM scratch + one COPY = one layer")

	// Config: user and entrypoint as kubebuilder's image has them.
	var cfg struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Config       struct {
			User       string   `json:"User"`
			Entrypoint []string `json:"Entrypoint"`
		} `json:"config"`
	}
	require.NoError(t, json.Unmarshal(readMember(t, archive, entry.Config), &cfg))
	assert.Equal(t, "linux", cfg.OS)
	assert.Equal(t, "65532:65532", cfg.Config.User)
	assert.Equal(t, []string{"/manager"}, cfg.Config.Entrypoint)

	// The layer holds /manager, executable, a static Linux ELF.
	layer := readMember(t, archive, entry.Layers[0])
	f, err := os.CreateTemp(t.TempDir(), "layer")
	require.NoError(t, err)
	_, err = f.Write(layer)
	require.NoError(t, err)
	f.Close()
	tr := tar.NewReader(mustOpen(t, f.Name()))
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if path.Clean("/"+h.Name) == "/manager" {
			found = true
			assert.NotZero(t, h.Mode&0o111, "executable")
			head := make([]byte, 4)
			_, err := io.ReadFull(tr, head)
			require.NoError(t, err)
			assert.Equal(t, "\x7fELF", string(head))
			assert.Greater(t, h.Size, int64(1<<20))
		}
	}
	assert.True(t, found, "layer %s has no /manager", entry.Layers[0])

	// The real archive through kind's nodeutils into a simulated node:
	// the node knows it under the localhost/ name with the archive's ID.
	node := enginetest.NewNode("course-control-plane")
	loaded, err := image.Load(ctx, image.LoadOptions{Engine: e, Nodes: []nodes.Node{node}, Ref: tag})
	require.NoError(t, err)
	assert.Equal(t, img.Ref, loaded.Ref)
	assert.Equal(t, entry.ID, loaded.ID)
	assert.Equal(t, entry.ID, node.ImageID("localhost/"+tag))
	assert.Equal(t, []string{"course-control-plane"}, loaded.LoadedInto)
}

func mustOpen(t *testing.T, p string) *os.File {
	f, err := os.Open(p)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// readMember returns one file of a tar archive.
func readMember(t *testing.T, archive, name string) []byte {
	t.Helper()
	tr := tar.NewReader(mustOpen(t, archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s not in %s", name, archive)
		}
		require.NoError(t, err)
		if path.Clean(h.Name) == path.Clean(name) {
			if h.Typeflag == tar.TypeSymlink {
				return readMember(t, archive, path.Join(path.Dir(name), h.Linkname))
			}
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			return b
		}
	}
}
