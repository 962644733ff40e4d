package controlplane

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/cli/cmdutil"
	cp "github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/iostreams"
)

// mirrorDir lays out the release sites under a directory, as `wget -x`
// would, with a checksum file beside every artifact (kwok's added, as a
// mirror may).
func mirrorDir(t *testing.T) string {
	dir := t.TempDir()
	arts, err := cp.ReleaseArtifacts(cp.DefaultVersions(), "linux", "amd64")
	require.NoError(t, err)
	for _, a := range arts {
		body := []byte("#!/bin/sh\necho " + a.Component + "\n")
		if a.Member != "" {
			var buf bytes.Buffer
			gz := gzip.NewWriter(&buf)
			tw := tar.NewWriter(gz)
			require.NoError(t, tw.WriteHeader(&tar.Header{Name: a.Member, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}))
			_, _ = tw.Write(body)
			require.NoError(t, tw.Close())
			require.NoError(t, gz.Close())
			body = buf.Bytes()
		}
		sum := sha256.Sum256(body)
		line := hex.EncodeToString(sum[:])
		if a.SumName != "" {
			line += "  " + a.SumName
		}
		for p, b := range map[string][]byte{a.Path: body, a.SumPath: []byte(line + "\n")} {
			full := filepath.Join(dir, filepath.FromSlash(p))
			require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
			require.NoError(t, os.WriteFile(full, b, 0o644))
		}
	}
	return dir
}

func runBuild(t *testing.T, args ...string) (string, string, error) {
	s, out, errOut := iostreams.Test(false)
	cmd := NewCommand(&cmdutil.Factory{IOStreams: s})
	cmd.SetArgs(append([]string{"build"}, args...))
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestBuildDownloadsFromAMirror(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		t.Setenv("KUBEBUILDER_ASSETS", "")
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv(cp.MirrorEnv, "")
	out, errOut, err := runBuild(t, "--mirror", "file://"+mirrorDir(t), "--print-dir")
	require.NoError(t, err, errOut)
	bin := strings.TrimSpace(out)
	assert.Equal(t, filepath.Join(cache, "labctl", "controlplane", cp.DefaultVersions().Key(), "bin"), bin)
	assert.Empty(t, cp.Missing(bin))
	assert.Contains(t, errOut, "Control-plane binaries — downloaded")
}

func TestFromSourceTriesNoMirror(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir()) // no go: the build stops at once
	_, errOut, err := runBuild(t, "--from-source", "--mirror", "file://"+mirrorDir(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Go toolchain")
	assert.NotContains(t, errOut, "download")
}
