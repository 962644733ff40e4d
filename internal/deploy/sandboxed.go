package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/userr"
)

// toolchain is what the go command reports about itself.
type toolchain struct {
	goBin      string
	GOVERSION  string
	GOOS       string
	GOARCH     string
	GOROOT     string
	GOCACHE    string
	GOMODCACHE string
	GOFLAGS    string
	CGOENABLED string `json:"CGO_ENABLED"`
	// GOPROXY and GOSUMDB are the grader's (its go env file included):
	// the modules a submission names are fetched through them.
	GOPROXY string
	GOSUMDB string
}

// id names the toolchain in cache keys.
func (t *toolchain) id() string {
	return strings.Join([]string{t.GOVERSION, t.GOOS, t.GOARCH, t.goBin, t.GOFLAGS, t.CGOENABLED}, " ")
}

var toolchains sync.Map // go command -> *toolchain

// toolchainOf asks the go command (default "go") about itself, once.
func toolchainOf(ctx context.Context, goCmd string) (*toolchain, error) {
	if goCmd == "" {
		goCmd = "go"
	}
	goBin, err := exec.LookPath(goCmd)
	if err != nil {
		return nil, userr.Env("the Go toolchain is needed to build the operator, and "+goCmd+" was not found", "install Go 1.24 or newer")
	}
	if t, ok := toolchains.Load(goBin); ok {
		return t.(*toolchain), nil
	}
	cmd := exec.CommandContext(ctx, goBin, "env", "-json", "GOVERSION", "GOOS", "GOARCH", "GOROOT", "GOCACHE", "GOMODCACHE", "GOFLAGS", "CGO_ENABLED", "GOPROXY", "GOSUMDB")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		return nil, userr.Env(fmt.Sprintf("`%s env` failed: %v", goBin, err), "check the Go installation")
	}
	t := &toolchain{goBin: goBin}
	if err := json.Unmarshal(out, t); err != nil {
		return nil, err
	}
	toolchains.Store(goBin, t)
	return t, nil
}

func mainPackage(p *Project) string {
	if _, err := os.Stat(filepath.Join(p.Dir, "cmd", "main.go")); err != nil {
		return "." // projects scaffolded before kubebuilder v4 keep main.go at the root
	}
	return "./cmd"
}

// mainFileBuilds makes sure the main package labctl builds is the one
// cmd/main.go belongs to: a build constraint that leaves main.go out (so
// that another file of the package, a launcher of some bundled binary,
// is what runs) makes the build fail as the project's.
func mainFileBuilds(p *Project, t *toolchain) error {
	dir := filepath.Join(p.Dir, mainPackage(p))
	ctxt := build.Default
	ctxt.GOOS, ctxt.GOARCH, ctxt.GOROOT = t.GOOS, t.GOARCH, t.GOROOT
	ctxt.CgoEnabled = t.CGOENABLED == "1"
	ctxt.BuildTags, ctxt.ToolTags = nil, nil
	main := filepath.Join(mainPackage(p), "main.go")
	ok, err := ctxt.MatchFile(dir, "main.go")
	if err == nil && !ok {
		err = fmt.Errorf("%s is left out of the build by a build constraint", main)
	}
	if err == nil {
		var f *ast.File
		if f, err = parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "main.go"), nil, parser.PackageClauseOnly); err == nil && f.Name.Name != "main" {
			err = fmt.Errorf("%s is package %s, not main", main, f.Name.Name)
		}
	}
	if err != nil {
		return &gobuild.Error{Dir: p.Dir, Output: err.Error() + ": labctl runs the main package of " + main, Err: err}
	}
	return nil
}

// buildSandboxed builds p (the box's private copy) into out, which lies in
// the box's home. The grader itself only downloads the modules go.mod
// names (see DownloadModules); the compiler runs in the sandbox (see
// BoxedGo), so it neither reads the grader's secrets nor poisons a cache
// another build uses.
func buildSandboxed(ctx context.Context, p *Project, t *toolchain, box *sandbox.Box, out string) error {
	if err := mainFileBuilds(p, t); err != nil {
		return err
	}
	if err := downloadModules(ctx, t, p.Dir); err != nil {
		return err
	}
	stderr, err := BoxedGo{Box: box}.run(ctx, t, gobuild.Command{Dir: p.Dir, Args: []string{"build", "-ldflags=-s -w", "-o", out, mainPackage(p)}})
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return &gobuild.Error{Dir: p.Dir, Output: stderr, Err: err}
	}
	return err
}

// startAndWait runs cmd, killing it (and, as it is the first process of
// its pid namespace, everything it started) when ctx ends.
func startAndWait(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Kill()
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	return err
}

// managerSandbox is the spec a sandboxed manager runs in: the box's copy
// as working directory, the binary and its operator directory (kubeconfig
// and token) read-only, and an environment with nothing of the grader's.
// It returns the spec and the binary's path inside the sandbox.
func managerSandbox(box *sandbox.Box, bin, opDir, kubeconfig string) (*sandbox.Spec, string) {
	inBox := filepath.Join(box.Root, "bin", "manager")
	spec := box.Spec(box.Src(), []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"KUBECONFIG=" + kubeconfig,
		"ENABLE_WEBHOOKS=false",
	}, sandbox.Bind{Src: bin, Dst: inBox}, sandbox.Bind{Src: opDir, Dst: opDir})
	return spec, inBox
}
