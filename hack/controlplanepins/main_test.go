package main

import (
	"crypto/sha256"
	"encoding/hex"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/controlplane"
)

// TestPinsFromASiteLaidOutLikeTheReleases: published checksums are copied,
// kwok (none published) is hashed, and the output is Go.
func TestPinsFromASiteLaidOutLikeTheReleases(t *testing.T) {
	dir := t.TempDir()
	want := map[string]string{}
	lists := map[string]string{} // SHA256SUMS: one per release, every platform
	put := func(p string, body []byte) {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, body, 0o644))
	}
	for _, arch := range []string{"amd64", "arm64"} {
		arts, err := controlplane.ReleaseArtifacts(controlplane.DefaultVersions(), "linux", arch)
		require.NoError(t, err)
		for _, a := range arts {
			body := []byte(a.Path)
			s := sha256.Sum256(body)
			sum := hex.EncodeToString(s[:])
			put(a.Path, body)
			want[a.Path] = sum
			switch {
			case a.Component == "kwok": // its releases publish no checksum
			case a.SumName == "":
				put(a.SumPath, []byte(sum+"\n"))
			default:
				lists[a.SumPath] += sum + "  " + a.SumName + "\n"
			}
		}
	}
	for p, list := range lists {
		put(p, []byte(strings.Repeat("0", 64)+"  other.tar.gz\n"+list))
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "pins.go")
	require.NoError(t, run(srv.URL+"/", out))
	src, err := os.ReadFile(out)
	require.NoError(t, err)
	_, err = parser.ParseFile(token.NewFileSet(), out, src, 0)
	require.NoError(t, err)
	for p, sum := range want {
		assert.Regexp(t, regexp.QuoteMeta(`"`+p+`":`)+`\s+"`+sum+`",`, string(src))
	}
	assert.Len(t, want, 10)
}
