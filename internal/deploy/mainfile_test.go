package deploy

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMainFileBuilds: the manager labctl runs is cmd/main.go's package;
// a build tag that drops main.go (so a launcher beside it runs instead)
// is a build failure.
func TestMainFileBuilds(t *testing.T) {
	tc := &toolchain{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GOROOT: runtime.GOROOT(), CGOENABLED: "0"}
	project := func(mainGo string) *Project {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "cmd"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cmd", "main.go"), []byte(mainGo), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cmd", "launcher.go"), []byte("package main\n"), 0o644))
		return &Project{Dir: dir}
	}
	require.NoError(t, mainFileBuilds(project("package main\n\nfunc main() {}\n"), tc))
	require.NoError(t, mainFileBuilds(project("//go:build linux || !linux\n\npackage main\n"), tc))
	err := mainFileBuilds(project("//go:build ignore\n\npackage main\n\nfunc main() {}\n"), tc)
	require.ErrorContains(t, err, "left out of the build by a build constraint")
	err = mainFileBuilds(project("//go:build labctl_graded\n\npackage main\n"), tc)
	require.ErrorContains(t, err, "left out of the build")
	err = mainFileBuilds(project("package launcher\n"), tc)
	require.ErrorContains(t, err, "not main")
}
