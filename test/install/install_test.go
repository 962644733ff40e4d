// Package install_test installs labctl the way a user does, `go install
// github.com/labctl/labctl/cmd/labctl@VERSION`, from a module proxy made
// of this checkout: what the Classroom workflow and the README ask for,
// and what a replace directive or a file outside the module zip breaks.
package install_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

const (
	modulePath = "github.com/labctl/labctl"
	// testVersionPrefix starts a tag no release will have.
	testVersionPrefix = "v0.0.0-test."
)

// testVersion is new every run: the go command takes a module version in
// its cache as immutable (its module index remembers a version's embed
// patterns and imports), so one fixed test tag would be answered from an
// earlier checkout's files.
var testVersion = fmt.Sprintf("%s%d", testVersionPrefix, time.Now().UnixNano())

func TestGoInstallFromAModuleProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles labctl from a module proxy: a minute or more")
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	tmp := t.TempDir()

	proxy := filepath.Join(tmp, "proxy")
	writeProxy(t, proxy, root)

	// The dependencies come from this machine's module cache, so their
	// compiled packages are the build cache's already (a fresh module
	// cache means new source paths and a 15-minute rebuild of every
	// dependency), then from the user's proxy. labctl itself comes only
	// from the file proxy, extracted to its own directory
	// (labctl@v0.0.0-test), never from this checkout; that version is
	// taken out of the module cache before and after.
	hostCache := goEnv(t, goBin, "GOMODCACHE")
	hostProxy := goEnv(t, goBin, "GOPROXY")
	forgetTestVersion(t, hostCache)
	t.Cleanup(func() { forgetTestVersion(t, hostCache) })
	env := append(os.Environ(),
		"GOPROXY="+fileURL(proxy)+","+hostProxy,
		"GOMODCACHE="+hostCache,
		"GOBIN="+filepath.Join(tmp, "bin"),
		"GONOSUMDB="+modulePath, // a test tag has no checksum on sum.golang.org
		"GOFLAGS=-mod=mod -modcacherw",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, goBin, "install", modulePath+"/cmd/labctl@"+testVersion)
	install.Dir = tmp // outside any module, as a user's shell is
	install.Env = env
	start := time.Now()
	out, err := install.CombinedOutput()
	require.NoError(t, err, "go install %s/cmd/labctl@%s:\n%s", modulePath, testVersion, out)
	t.Logf("go install took %s", time.Since(start).Round(time.Second))

	labctl := filepath.Join(tmp, "bin", "labctl")
	version := run(t, labctl, "version")
	assert.Contains(t, version, "labctl "+testVersion, "the module version go install stamped")

	// The embedded reference operators came along: solution prints their
	// code (lab 8.2 builds on the Database operator, 2.4 on Hello World).
	backup := run(t, labctl, "solution", "lab-8.2")
	assert.Contains(t, backup, "operator/api/v1/backup_types.go")
	assert.Contains(t, backup, "func (r *BackupReconciler) Reconcile(")
	hello := run(t, labctl, "solution", "lab-2.4")
	assert.Contains(t, hello, "hello-world-operator/")
}

// forgetTestVersion removes every test version of labctl from the module
// cache (this run's and any a killed run left): extracted directories and
// download-cache files; the list keeps any real version a user installed.
func forgetTestVersion(t *testing.T, modCache string) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(modCache, modulePath+"@"+testVersionPrefix+"*"))
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
			if err == nil {
				_ = os.Chmod(p, 0o755) // module caches are read-only
			}
			return nil
		})
		require.NoError(t, os.RemoveAll(dir))
	}
	dl := filepath.Join(modCache, "cache", "download", modulePath, "@v")
	files, _ := filepath.Glob(filepath.Join(dl, testVersionPrefix+"*"))
	for _, f := range files {
		_ = os.Remove(f)
	}
	list := filepath.Join(dl, "list")
	raw, err := os.ReadFile(list)
	if err != nil {
		return
	}
	var keep []string
	for _, v := range strings.Fields(string(raw)) {
		if !strings.HasPrefix(v, testVersionPrefix) {
			keep = append(keep, v)
		}
	}
	if len(keep) == 0 {
		_ = os.Remove(list)
		return
	}
	_ = os.WriteFile(list, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
}

// writeProxy lays out a GOPROXY directory serving testVersion of this
// checkout: list, info, mod and the module zip, as `go mod download -json`
// reads them. The zip holds what git would publish at a tag (tracked and
// new files, not ignored ones), so uncommitted work is tested too.
func writeProxy(t *testing.T, proxy, root string) {
	t.Helper()
	escaped, err := module.EscapePath(modulePath)
	require.NoError(t, err)
	dir := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	mv := module.Version{Path: modulePath, Version: testVersion}

	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	write := func(name string, data []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	write("list", []byte(testVersion+"\n"))
	write(testVersion+".info", fmt.Appendf(nil, `{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, testVersion))
	write(testVersion+".mod", gomod)

	var zip bytes.Buffer
	if files, ok := gitFiles(t, root); ok {
		require.NoError(t, modzip.Create(&zip, mv, files))
	} else {
		require.NoError(t, modzip.CreateFromDir(&zip, mv, root))
	}
	write(testVersion+".zip", zip.Bytes())
}

// gitFiles lists the checkout's files that are tracked or new but not
// ignored; false outside a git checkout.
func gitFiles(t *testing.T, root string) ([]modzip.File, bool) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Logf("not a git checkout (%v): zipping the directory as it is", err)
		return nil, false
	}
	var files []modzip.File
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		info, err := os.Lstat(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the work tree, not yet in git
		}
		files = append(files, diskFile{root: root, name: name, info: info})
	}
	return files, true
}

type diskFile struct {
	root, name string
	info       os.FileInfo
}

func (f diskFile) Path() string                 { return f.name }
func (f diskFile) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(f.root, f.name)) }

func goEnv(t *testing.T, goBin, name string) string {
	t.Helper()
	out, err := exec.Command(goBin, "env", name).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

func fileURL(dir string) string {
	p := filepath.ToSlash(dir)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // file:///C:/... on Windows
	}
	return "file://" + p
}

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "labctl %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}
