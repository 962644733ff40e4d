package controlplane

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// releaseSite is a local HTTP server laid out like dl.k8s.io and the GitHub
// releases of etcd and kwok under one mirror root, with faults to inject.
type releaseSite struct {
	dir  string
	srv  *httptest.Server
	arts []Artifact
	pins map[string]string // kwok publishes no checksum: labctl pins it

	mu       sync.Mutex
	requests map[string]int // URL path -> count
	ranges   []string       // Range headers asked for
	// fault, when set, may answer a request itself (returns true).
	fault func(w http.ResponseWriter, r *http.Request, n int) bool
}

func newReleaseSite(t *testing.T) *releaseSite {
	t.Helper()
	s := &releaseSite{dir: t.TempDir(), requests: map[string]int{}, pins: map[string]string{}}
	arts, err := ReleaseArtifacts(DefaultVersions(), "linux", "amd64")
	require.NoError(t, err)
	s.arts = arts
	rng := rand.New(rand.NewSource(1))
	sums := map[string][]string{}
	for _, a := range arts {
		// A script that names itself, then bytes it never reads: big
		// enough for a transfer to be cut in the middle.
		exe := []byte(fmt.Sprintf("#!/bin/sh\necho %s\nexit 0\n", a.Component))
		pad := make([]byte, 512<<10)
		rng.Read(pad)
		exe = append(exe, pad...)
		body := exe
		if a.Member != "" {
			body = tarGz(t, map[string][]byte{a.Member: exe, strings.Replace(a.Member, "/etcd", "/etcdctl", 1): []byte("#!/bin/sh\n")})
		}
		s.write(t, a.Path, body)
		sum := sha256.Sum256(body)
		hexSum := hex.EncodeToString(sum[:])
		switch {
		case a.Component == "kwok":
			s.pins[a.Path] = hexSum // like kwok's releases: no checksum file
		case a.SumName == "":
			s.write(t, a.SumPath, []byte(hexSum+"\n"))
		default:
			sums[a.SumPath] = append(sums[a.SumPath], hexSum+"  "+a.SumName, strings.Repeat("0", 64)+"  other-file.tar.gz")
		}
	}
	for p, lines := range sums {
		s.write(t, p, []byte(strings.Join(lines, "\n")+"\n"))
	}
	files := http.FileServer(http.Dir(s.dir))
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests[r.URL.Path]++
		n := s.requests[r.URL.Path]
		if rg := r.Header.Get("Range"); rg != "" {
			s.ranges = append(s.ranges, r.URL.Path+" "+rg)
		}
		fault := s.fault
		s.mu.Unlock()
		if fault != nil && fault(w, r, n) {
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *releaseSite) write(t *testing.T, p string, body []byte) {
	full := filepath.Join(s.dir, filepath.FromSlash(p))
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	require.NoError(t, os.WriteFile(full, body, 0o644))
}

func (s *releaseSite) read(t *testing.T, p string) []byte {
	b, err := os.ReadFile(filepath.Join(s.dir, filepath.FromSlash(p)))
	require.NoError(t, err)
	return b
}

func (s *releaseSite) artifact(component string) Artifact {
	for _, a := range s.arts {
		if a.Component == component {
			return a
		}
	}
	panic(component)
}

func (s *releaseSite) count(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests["/"+p]
}

func (s *releaseSite) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.requests {
		n += c
	}
	return n
}

// options point Ensure at the site, with a go command that must not run.
func (s *releaseSite) options(cache string, notices *[]string) Options {
	return Options{CacheDir: cache, Mirror: s.srv.URL, Go: "/nonexistent/go", pins: s.pins, goos: "linux", arch: "amd64",
		Notice: func(l string) { *notices = append(*notices, l) }}
}

func tarGz(t *testing.T, files map[string][]byte) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}))
		_, err := tw.Write(body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// assertNothingHalfDone: no download directory or .part file anywhere in
// the cache, and bin either complete or absent.
func assertNothingHalfDone(t *testing.T, cache string) {
	t.Helper()
	root := filepath.Join(cache, DefaultVersions().Key())
	_ = filepath.Walk(cache, func(p string, info os.FileInfo, err error) error {
		if err == nil && (strings.HasPrefix(info.Name(), "download-") || strings.HasSuffix(p, ".part")) {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
	bin := filepath.Join(root, "bin")
	if missing := Missing(bin); len(missing) > 0 {
		_, err := os.Stat(bin)
		assert.True(t, os.IsNotExist(err), "bin holds only part of the components (lacks %v)", missing)
	}
}

func runComponent(t *testing.T, dir, c string) string {
	out, err := exec.Command(filepath.Join(dir, c)).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

func TestDownloadInstallsVerifiedReleaseBinaries(t *testing.T) {
	site := newReleaseSite(t)
	cache := t.TempDir()
	var notices []string
	b, err := Ensure(context.Background(), site.options(cache, &notices))
	require.NoError(t, err)
	assert.Equal(t, "downloaded", b.Source)
	assert.Equal(t, filepath.Join(cache, DefaultVersions().Key(), "bin"), b.Dir, "the cache layout `up` looks in")
	assert.Empty(t, Missing(b.Dir))
	for _, c := range Components {
		assert.Equal(t, c, runComponent(t, b.Dir, c))
	}
	_, err = os.Stat(filepath.Join(b.Dir, "etcdctl"))
	assert.True(t, os.IsNotExist(err), "only etcd is taken from etcd's tarball")
	assert.Empty(t, notices)
	assertNothingHalfDone(t, cache)

	before := site.total()
	b, err = Ensure(context.Background(), site.options(cache, &notices))
	require.NoError(t, err)
	assert.Equal(t, "cache", b.Source)
	assert.Equal(t, before, site.total(), "a cached set is not fetched again")
}

func TestDownloadFetchesACorruptFileAgain(t *testing.T) {
	site := newReleaseSite(t)
	a := site.artifact("kube-apiserver")
	good := site.read(t, a.Path)
	site.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		if r.URL.Path != "/"+a.Path || n > 1 {
			return false
		}
		bad := bytes.Clone(good)
		bad[len(bad)/2] ^= 0xff
		_, _ = w.Write(bad)
		return true
	}
	cache := t.TempDir()
	var notices []string
	b, err := Ensure(context.Background(), site.options(cache, &notices))
	require.NoError(t, err)
	assert.Equal(t, "downloaded", b.Source)
	assert.Equal(t, 2, site.count(a.Path), "the corrupt copy is dropped and fetched again from zero")
	assert.Equal(t, "kube-apiserver", runComponent(t, b.Dir, "kube-apiserver"))
	assertNothingHalfDone(t, cache)
}

func TestDownloadWithAWrongChecksumInstallsNothing(t *testing.T) {
	site := newReleaseSite(t)
	a := site.artifact("kube-scheduler")
	site.write(t, a.SumPath, []byte(strings.Repeat("ab", 32)+"\n"))
	cache := t.TempDir()
	var notices []string
	_, err := Ensure(context.Background(), site.options(cache, &notices))
	require.Error(t, err, "the fallback build has no go command here")
	assert.Contains(t, err.Error(), "Go toolchain")
	require.Len(t, notices, 1)
	assert.Contains(t, notices[0], "download of kube-scheduler v1.37.2 failed (sha256 ")
	assert.Contains(t, notices[0], "expected abababababab")
	assert.Contains(t, notices[0], "building from the Go module proxy instead, 12-20 min")
	assert.Equal(t, 2, site.count(a.Path), "fetched twice: a corrupt transfer is not a wrong file")
	assert.Equal(t, len(Components), len(Missing(filepath.Join(cache, DefaultVersions().Key(), "bin"))), "nothing installed")
	assertNothingHalfDone(t, cache)

	// A pin wins over what the site publishes.
	opts := site.options(t.TempDir(), &notices)
	sum := sha256.Sum256(site.read(t, a.Path))
	opts.pins = map[string]string{a.Path: hex.EncodeToString(sum[:])}
	for k, v := range site.pins {
		opts.pins[k] = v
	}
	b, err := Ensure(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, "downloaded", b.Source)
}

// cutAfterHalf answers with the whole length announced and half the body,
// then drops the connection.
func cutAfterHalf(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body[:len(body)/2])
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler)
}

func TestDownloadResumesADroppedConnection(t *testing.T) {
	site := newReleaseSite(t)
	a := site.artifact("kube-apiserver")
	body := site.read(t, a.Path)
	site.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		if r.URL.Path != "/"+a.Path || n > 1 {
			return false
		}
		cutAfterHalf(w, body)
		return true
	}
	cache := t.TempDir()
	var notices []string
	b, err := Ensure(context.Background(), site.options(cache, &notices))
	require.NoError(t, err)
	assert.Equal(t, "downloaded", b.Source)
	assert.Empty(t, notices)
	assert.Equal(t, 2, site.count(a.Path))
	require.Len(t, site.ranges, 1, "the second request asks only for the rest")
	prefix := "/" + a.Path + " bytes="
	require.True(t, strings.HasPrefix(site.ranges[0], prefix), site.ranges[0])
	from, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(site.ranges[0], prefix), "-"))
	require.NoError(t, err)
	assert.Greater(t, from, 0)
	assert.LessOrEqual(t, from, len(body)/2)
	assert.Equal(t, "kube-apiserver", runComponent(t, b.Dir, "kube-apiserver"), "the resumed file is whole (its checksum matched)")
	assertNothingHalfDone(t, cache)
}

func TestDownloadWithoutAnyChecksumIsRefused(t *testing.T) {
	site := newReleaseSite(t)
	cache := t.TempDir()
	var notices []string
	opts := site.options(cache, &notices)
	opts.pins = map[string]string{} // kwok unpinned, and its release publishes no checksum
	_, err := Ensure(context.Background(), opts)
	require.Error(t, err)
	require.Len(t, notices, 1)
	assert.Equal(t, "download of kwok v0.8.0 failed (no sha256 pinned in labctl, and kwok-linux-amd64.sha256: 404 Not Found): building from the Go module proxy instead, 12-20 min", notices[0])
	assert.Zero(t, site.count(site.artifact("kwok").Path), "an unverifiable file is not even fetched")
	assertNothingHalfDone(t, cache)

	// A mirror that publishes one beside it is trusted as dl.k8s.io's are.
	a := site.artifact("kwok")
	site.write(t, a.SumPath, []byte(site.pinsFor(a)+"  kwok-linux-amd64\n"))
	b, err := Ensure(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, "downloaded", b.Source)
}

func (s *releaseSite) pinsFor(a Artifact) string { return s.pins[a.Path] }

func TestDownloadThatKeepsDroppingIsGivenUp(t *testing.T) {
	site := newReleaseSite(t)
	a := site.artifact("kube-controller-manager")
	body := site.read(t, a.Path)
	site.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		if r.URL.Path != "/"+a.Path {
			return false
		}
		cutAfterHalf(w, body) // and never honours Range
		return true
	}
	cache := t.TempDir()
	var notices []string
	_, err := Ensure(context.Background(), site.options(cache, &notices))
	require.Error(t, err)
	require.Len(t, notices, 1)
	assert.Contains(t, notices[0], "download of kube-controller-manager v1.37.2 failed (")
	assert.Contains(t, notices[0], "connection dropped")
	assert.Equal(t, downloadAttempts, site.count(a.Path))
	assertNothingHalfDone(t, cache)
}

func TestDownloadThatStallsIsGivenUp(t *testing.T) {
	site := newReleaseSite(t)
	a := site.artifact("etcd")
	release := make(chan struct{})
	defer close(release)
	site.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		if r.URL.Path != "/"+a.Path {
			return false
		}
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write([]byte("x"))
		_ = http.NewResponseController(w).Flush()
		<-release
		return true
	}
	cache := t.TempDir()
	var notices []string
	opts := site.options(cache, &notices)
	opts.idleTimeout = 50 * time.Millisecond
	_, err := Ensure(context.Background(), opts)
	require.Error(t, err)
	require.Len(t, notices, 1)
	assert.Contains(t, notices[0], "download of etcd v3.7.3 failed (no data for 50ms)")
	assertNothingHalfDone(t, cache)
}

func TestDownloadNotFoundFallsBackToBuilding(t *testing.T) {
	site := newReleaseSite(t)
	a := site.artifact("kwok")
	require.NoError(t, os.Remove(filepath.Join(site.dir, filepath.FromSlash(a.Path))))
	gomod := filepath.Join(t.TempDir(), "k8s.mod")
	require.NoError(t, os.WriteFile(gomod, []byte(fakeKubernetesGoMod), 0o644))
	// The builder, faked: the go command writes whatever -o names.
	goCmd := fakeGo(t, `case "$1" in
  mod) if [ "$2" = download ]; then echo '{"GoMod": "`+gomod+`"}'; fi; exit 0 ;;
  list) exit 0 ;;
  build) while [ $# -gt 0 ]; do if [ "$1" = -o ]; then printf '#!/bin/sh\necho built\n' > "$2"; chmod +x "$2"; fi; shift; done; exit 0 ;;
esac`)
	cache := t.TempDir()
	var notices []string
	opts := site.options(cache, &notices)
	opts.Go = goCmd
	b, err := Ensure(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, "built", b.Source)
	assert.Equal(t, []string{"download of kwok v0.8.0 failed (404 Not Found): building from the Go module proxy instead, 12-20 min"}, notices)
	assert.Equal(t, 1, site.count(a.Path), "a 404 is not retried")
	for _, c := range Components {
		assert.Equal(t, "built", runComponent(t, b.Dir, c), "%s is the built binary, not a downloaded one", c)
	}
	assertNothingHalfDone(t, cache)
}

func TestConcurrentEnsuresShareOneDownload(t *testing.T) {
	site := newReleaseSite(t)
	cache := t.TempDir()
	var wg sync.WaitGroup
	sources := make([]string, 3)
	for i := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var notices []string
			b, err := Ensure(context.Background(), site.options(cache, &notices))
			if assert.NoError(t, err) {
				sources[i] = b.Source
			}
		}()
	}
	wg.Wait()
	assert.ElementsMatch(t, []string{"downloaded", "cache", "cache"}, sources)
	for _, a := range site.arts {
		assert.Equal(t, 1, site.count(a.Path), "%s fetched once", a.Path)
	}
	assertNothingHalfDone(t, cache)
}

func TestInterruptedDownloadLeavesNothing(t *testing.T) {
	site := newReleaseSite(t)
	a := site.artifact("kube-scheduler")
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	defer close(release)
	site.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		if r.URL.Path != "/"+a.Path {
			return false
		}
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write([]byte("x"))
		_ = http.NewResponseController(w).Flush()
		cancel() // Ctrl-C while the body is coming
		<-release
		return true
	}
	cache := t.TempDir()
	var notices []string
	_, err := Ensure(ctx, site.options(cache, &notices))
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, notices, "an interrupt is not a reason to build")
	assertNothingHalfDone(t, cache)
}

func TestFromSourceDownloadsNothing(t *testing.T) {
	site := newReleaseSite(t)
	var notices []string
	opts := site.options(t.TempDir(), &notices)
	opts.FromSource = true
	_, err := Ensure(context.Background(), opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Go toolchain")
	assert.Zero(t, site.total())
	assert.Empty(t, notices)
}

func TestMirrorComesFromTheFlagThenTheEnvironment(t *testing.T) {
	t.Setenv(MirrorEnv, "")
	assert.Equal(t, "https://", mirrorRoot(""))
	t.Setenv(MirrorEnv, "http://mirror.school.example/cp")
	assert.Equal(t, "http://mirror.school.example/cp/", mirrorRoot(""))
	assert.Equal(t, "file:///media/usb/", mirrorRoot("file:///media/usb/"))
}

func TestReleaseArtifactsAreTheOfficialURLs(t *testing.T) {
	arts, err := ReleaseArtifacts(DefaultVersions(), "linux", "arm64")
	require.NoError(t, err)
	var urls []string
	for _, a := range arts {
		urls = append(urls, DefaultMirror+a.Path)
	}
	assert.Equal(t, []string{
		"https://dl.k8s.io/release/v1.37.2/bin/linux/arm64/kube-apiserver",
		"https://dl.k8s.io/release/v1.37.2/bin/linux/arm64/kube-controller-manager",
		"https://dl.k8s.io/release/v1.37.2/bin/linux/arm64/kube-scheduler",
		"https://github.com/etcd-io/etcd/releases/download/v3.7.3/etcd-v3.7.3-linux-arm64.tar.gz",
		"https://github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/kwok-linux-arm64",
	}, urls)
	_, err = ReleaseArtifacts(DefaultVersions(), "darwin", "arm64")
	assert.Error(t, err, "no Kubernetes server binaries for macOS: build")
}

func TestParseSum(t *testing.T) {
	h := strings.Repeat("a1", 32)
	sum, ok := parseSum(h+"\n", "")
	assert.True(t, ok)
	assert.Equal(t, h, sum)
	sum, ok = parseSum("ffff  x.tar.gz\n"+h+" *etcd.tar.gz\n", "etcd.tar.gz")
	assert.True(t, ok)
	assert.Equal(t, h, sum)
	_, ok = parseSum("<html>not found</html>", "")
	assert.False(t, ok)
	_, ok = parseSum(h+"  other.tar.gz\n", "etcd.tar.gz")
	assert.False(t, ok)
}

func TestDownloadRetriesAChecksumFileThatFailsOnce(t *testing.T) {
	site := newReleaseSite(t)
	a := site.artifact("etcd")
	site.fault = func(w http.ResponseWriter, r *http.Request, n int) bool {
		if r.URL.Path == "/"+a.SumPath && n == 1 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	var notices []string
	b, err := Ensure(context.Background(), site.options(t.TempDir(), &notices))
	require.NoError(t, err)
	assert.Equal(t, "downloaded", b.Source)
	assert.Equal(t, 2, site.count(a.SumPath))
}

func TestUnreachableReleaseSiteIsOneLine(t *testing.T) {
	var notices []string
	opts := Options{CacheDir: t.TempDir(), Mirror: "http://release-site.invalid/", Go: "/nonexistent/go", goos: "linux", arch: "amd64",
		Notice: func(l string) { notices = append(notices, l) }}
	_, err := Ensure(context.Background(), opts)
	require.Error(t, err)
	require.Len(t, notices, 1)
	assert.Regexp(t, `^download of kube-apiserver v1\.37\.2 failed \(no route to release-site\.invalid: [^\n]+\): building from the Go module proxy instead, 12-20 min$`, notices[0])
	assertNothingHalfDone(t, opts.CacheDir)
}
