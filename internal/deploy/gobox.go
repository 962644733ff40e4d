package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"

	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/userr"
)

// BoxedGo runs the go command inside a grading box: as the box's
// unprivileged user, in its mount and pid namespaces, offline
// (GOPROXY=off), with an environment of its own (nothing of the
// grader's), GOROOT and the module cache read-only, and the grader's
// build cache through an overlay (its entries are read, the box's writes
// land in the box). Every go command that compiles a submission's code
// while grading runs here, the manager's build and the build check's:
// cgo and the assembler read whatever the submission's files #include,
// and in the box that is only what the box shows.
type BoxedGo struct {
	Box *sandbox.Box
	// Go is the go command (default "go").
	Go string
	// Nice, when positive, lowers the priority of the commands that only
	// compile (gobuild.Command.Yield: a build beside a cluster under
	// test); tests run at the box's normal priority.
	Nice int
}

// Run runs go with args in dir (a directory the box shows: its copy of
// the submission) and returns what it wrote on stderr (its stdout, say
// the packages go list lists, is dropped). An *exec.ExitError means go
// ran and failed: stderr says why (the project's errors). ctx's error
// means it was stopped; any other error is the grader's (no Go
// toolchain, a sandbox that cannot be set up). Run is a
// checks.GoRunner.
func (g BoxedGo) Run(ctx context.Context, c gobuild.Command) (stderr string, err error) {
	t, err := toolchainOf(ctx, g.Go)
	if err != nil {
		return "", err
	}
	return g.run(ctx, t, c)
}

func (g BoxedGo) run(ctx context.Context, t *toolchain, c gobuild.Command) (stderr string, err error) {
	box := g.Box
	env := []string{
		"PATH=" + filepath.Join(t.GOROOT, "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"GOTOOLCHAIN=local", "GOWORK=off", "GOPROXY=off", "GOSUMDB=off", "GOENV=off",
		"GOMODCACHE=" + t.GOMODCACHE, "GOFLAGS=" + t.GOFLAGS, "CGO_ENABLED=" + t.CGOENABLED,
	}
	binds := []sandbox.Bind{{Src: t.GOROOT, Dst: t.GOROOT}}
	if t.GOMODCACHE != "" && fileExists(t.GOMODCACHE) {
		binds = append(binds, sandbox.Bind{Src: t.GOMODCACHE, Dst: t.GOMODCACHE})
	}
	for _, d := range c.Read {
		binds = append(binds, sandbox.Bind{Src: d, Dst: d})
	}
	for _, d := range c.Write {
		if err := os.Chown(d, box.UID, box.GID); err != nil {
			return "", fmt.Errorf("giving %s to the sandbox: %w", d, err)
		}
		binds = append(binds, sandbox.Bind{Src: d, Dst: d, Writable: true})
	}
	spec := box.Spec(c.Dir, append(env, c.Env...), binds...)
	if c.Yield {
		spec.Nice = g.Nice
	}
	gocache := filepath.Join(box.Home(), ".cache", "go-build")
	if t.GOCACHE != "" && fileExists(t.GOCACHE) && sandbox.OverlaySupported() {
		ov, dst, release, err := box.GoCache(t.GOCACHE)
		if err != nil {
			return "", err
		}
		defer release()
		spec.Overlays = append(spec.Overlays, ov)
		gocache = dst
	}
	spec.Env = append(spec.Env, "GOCACHE="+gocache)
	cmd, err := spec.Command(append([]string{t.goBin}, c.Args...), nil)
	if err != nil {
		return "", err
	}
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errOut
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	}
	err = startAndWait(ctx, cmd)
	if err != nil && ctx.Err() != nil {
		return "", ctx.Err()
	}
	var exit *exec.ExitError
	// Only the helper exits with SetupFailed, and only before the go
	// command starts: a project's compiler errors that quote the same
	// words stay the project's.
	if errors.As(err, &exit) && exit.ExitCode() == sandbox.SetupFailed && bytes.HasPrefix(errOut.Bytes(), []byte("labctl sandbox:")) {
		return "", userr.Env("cannot set up the sandbox to build in: "+strings.TrimSpace(errOut.String()), "run `labctl doctor`; or grade with --unsafe-no-sandbox (the submission then runs unconfined)")
	}
	return errOut.String(), err
}

// DownloadModules fetches the modules the go.mod in dir (a box's copy of
// a submission) needs into the grader's module cache, with the network,
// before the box (which has none) builds. It is the one go command of a
// grading that runs as the grader, outside the box, so it is given nothing
// to run and nothing to read beyond the copy's go.mod and go.sum:
//
//   - `go mod download` compiles and runs no code of the project;
//   - GOVCS=*:off and GIT_ALLOW_PROTOCOL=none: no version control tool
//     runs, so a module path can lead neither to a git (or hg, svn, ...)
//     fetch nor to a local repository; modules come from the grader's
//     GOPROXY or not at all;
//   - GOENV=off and GOPRIVATE, GONOPROXY, GONOSUMDB, GOINSECURE empty:
//     every module is fetched through the proxy and its checksum verified
//     (GOPROXY and GOSUMDB stay the grader's, read from go env);
//   - GOTOOLCHAIN=local: a toolchain line cannot switch to (download and
//     run) another go; GOWORK=off: no go.work from elsewhere;
//     GOFLAGS=-mod=mod: vendor/ is ignored, a missing go.sum line added.
//
// A replace by a directory is not downloaded, but go reads that
// directory's go.mod (as root, wherever it is): one outside the copy is
// refused before go runs, as a build failure of the project.
func DownloadModules(ctx context.Context, goCmd, dir string) error {
	t, err := toolchainOf(ctx, goCmd)
	if err != nil {
		return err
	}
	return downloadModules(ctx, t, dir)
}

func downloadModules(ctx context.Context, t *toolchain, dir string) error {
	if err := replacesInside(dir); err != nil {
		return &gobuild.Error{Dir: dir, Output: err.Error(), Err: err}
	}
	dl := exec.CommandContext(ctx, t.goBin, "mod", "download")
	dl.Dir = dir
	dl.Env = downloadEnv(os.Environ(), t)
	var buf bytes.Buffer
	dl.Stdout, dl.Stderr = &buf, &buf
	if err := dl.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &gobuild.Error{Dir: dir, Output: buf.String(), Err: err}
	}
	return nil
}

// downloadEnv is the grader's environment (proxy settings, HOME) with
// what DownloadModules fixes set last: of duplicate keys, exec uses the
// last.
func downloadEnv(base []string, t *toolchain) []string {
	return append(base,
		"GOTOOLCHAIN=local", "GOWORK=off", "GOENV=off", "GOFLAGS=-mod=mod",
		"GOPROXY="+t.GOPROXY, "GOSUMDB="+t.GOSUMDB, "GOMODCACHE="+t.GOMODCACHE,
		"GOPRIVATE=", "GONOPROXY=", "GONOSUMDB=", "GOINSECURE=",
		"GOVCS=*:off", "GIT_ALLOW_PROTOCOL=none", "GIT_TERMINAL_PROMPT=0",
	)
}

// replacesInside refuses a go.mod in dir that replaces a module with a
// directory outside dir, and one it cannot parse (the go command would
// refuse it too, after reading what it names).
func replacesInside(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil // no go.mod: go says so
	}
	f, err := modfile.Parse("go.mod", raw, nil)
	if err != nil {
		return err
	}
	for _, r := range f.Replace {
		if r.New.Version != "" || !modfile.IsDirectoryPath(r.New.Path) {
			continue
		}
		target := r.New.Path
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		if rel, err := filepath.Rel(dir, target); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("go.mod replaces %s with %s, a directory outside the project: grading has only the project's own files; move that module into the project or require a published version", r.Old.Path, r.New.Path)
		}
	}
	return nil
}
