package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/gobuild"
)

// The grader's go mod download (root, with the network) runs no version
// control tool, whatever the grader's settings say (GOPROXY=direct,
// GOPRIVATE naming the module): a module path cannot lead it to a git
// fetch, a local repository included.
func TestDownloadModulesRunsNoVCS(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	// A git that records that it ran.
	bin, ran := t.TempDir(), filepath.Join(t.TempDir(), "git-ran")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\ntouch "+ran+"\nexit 1\n"), 0o755))
	t.Setenv("PATH", bin+string(filepath.ListSeparator)+os.Getenv("PATH"))
	t.Setenv("GOPRIVATE", "github.com/labctl-evil/*")
	t.Setenv("GONOSUMDB", "*")
	t.Setenv("GOFLAGS", "-mod=vendor")
	tc := &toolchain{goBin: goBin, GOPROXY: "direct", GOSUMDB: "off", GOMODCACHE: t.TempDir()}

	dir := t.TempDir()
	// github.com paths are fetched with git directly, no network lookup
	// first: without GOVCS=*:off this would run git.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/sub\n\ngo 1.22\n\nrequire github.com/labctl-evil/fetch v1.0.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub.go"), []byte("package sub\n\nimport _ \"github.com/labctl-evil/fetch\"\n"), 0o644))
	err = downloadModules(context.Background(), tc, dir)
	var build *gobuild.Error
	require.ErrorAs(t, err, &build)
	assert.Contains(t, build.Output, "GOVCS disallows using git")
	assert.NoFileExists(t, ran, "git ran")
}

// A replace by a directory outside the copy is refused before go runs
// (go mod download would read that directory's go.mod, as root); one
// inside is the project's own.
func TestDownloadModulesStaysInTheCopy(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	tc := &toolchain{goBin: goBin, GOPROXY: "off", GOSUMDB: "off", GOMODCACHE: t.TempDir()}
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "elsewhere"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "elsewhere", "go.mod"), []byte("module example.com/x\n"), 0o644))
	n := 0
	project := func(target string) string {
		n++
		dir := filepath.Join(root, fmt.Sprintf("project%d", n))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "inside"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "inside", "go.mod"), []byte("module example.com/x\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/p\n\ngo 1.22\n\nrequire example.com/x v0.0.0\n\nreplace example.com/x => "+target+"\n"), 0o644))
		return dir
	}
	for _, outside := range []string{"../elsewhere", filepath.Join(root, "elsewhere"), "./inside/../../elsewhere"} {
		err := downloadModules(context.Background(), tc, project(outside))
		var build *gobuild.Error
		require.ErrorAs(t, err, &build, outside)
		assert.Contains(t, build.Output, "outside the project", outside)
	}
	require.NoError(t, downloadModules(context.Background(), tc, project("./inside")))
}

// The download's environment: the grader's, with every setting that
// could run a VCS, skip a checksum or switch toolchains overridden.
func TestDownloadEnv(t *testing.T) {
	env := downloadEnv([]string{"HOME=/root", "GOPRIVATE=*", "GOVCS=*:all", "GOTOOLCHAIN=auto", "GOFLAGS=-mod=vendor"},
		&toolchain{GOPROXY: "https://proxy.example", GOSUMDB: "sum.golang.org", GOMODCACHE: "/cache"})
	// Of duplicate keys, exec keeps the last: Environ shows what go gets.
	cmd := exec.Command("go")
	cmd.Env = env
	last := map[string]string{}
	for _, kv := range cmd.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	for k, want := range map[string]string{
		"HOME": "/root", "GOPRIVATE": "", "GONOSUMDB": "", "GONOPROXY": "", "GOINSECURE": "",
		"GOVCS": "*:off", "GIT_ALLOW_PROTOCOL": "none", "GOTOOLCHAIN": "local", "GOWORK": "off", "GOENV": "off",
		"GOFLAGS": "-mod=mod", "GOPROXY": "https://proxy.example", "GOSUMDB": "sum.golang.org", "GOMODCACHE": "/cache",
	} {
		assert.Equal(t, want, last[k], k)
	}
}
