// Package image builds an operator's container image with Docker or Podman
// and loads it into the nodes of a kind cluster, confirming on each node
// that the image ID is the one built (the stale-image trap of the labs).
package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/userr"
)

// Mode is how the image is built.
type Mode string

const (
	// ModeDockerfile runs `<engine> build` with the project's Dockerfile,
	// as `make docker-build` does.
	ModeDockerfile Mode = "dockerfile"
	// ModeFast compiles the manager with the host's Go (and its build
	// cache) and packages it into a FROM-scratch image.
	ModeFast Mode = "fast"
)

// ParseMode checks a --build value.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModeDockerfile:
		return ModeDockerfile, nil
	case ModeFast:
		return ModeFast, nil
	}
	return "", userr.Usage(fmt.Sprintf("unknown build mode %q", s), "use dockerfile (the project's Dockerfile) or fast (host Go build, scratch image)")
}

// BuildOptions say what to build.
type BuildOptions struct {
	Engine *engine.Engine
	// Dir is the kubebuilder project.
	Dir string
	// Tag is the image name (name[:tag]); see ValidateRef.
	Tag  string
	Mode Mode
	// Go is the go command for ModeFast (default "go").
	Go string
	// GOARCH of the manager in ModeFast (default the engine's: an amd64
	// Go under Rosetta on an arm Mac must still build for arm64 nodes).
	Arch string
	// Progress gets short updates; Log gets the full build output (may be
	// nil). A failed build's error carries its log's last lines (see
	// PrintLogTail).
	Progress func(format string, args ...any)
	Log      io.Writer
}

// Image is a built image as the engine knows it.
type Image struct {
	// Ref is the name the engine stores it under (Podman:
	// localhost/NAME:TAG for an unqualified tag).
	Ref string
	// ID is the image ID, "sha256:<hex>".
	ID string
}

// scratchDockerfile packages a static manager binary, as kubebuilder's
// Dockerfile does on distroless, without pulling any base image.
const scratchDockerfile = `FROM scratch
COPY manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
`

// Build builds the operator image of a project.
func Build(ctx context.Context, o BuildOptions) (*Image, error) {
	if err := ValidateRef(o.Tag); err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	switch o.Mode {
	case ModeFast:
		if err := buildFast(ctx, o); err != nil {
			return nil, err
		}
	case ModeDockerfile, "":
		dockerfile := filepath.Join(o.Dir, "Dockerfile")
		if _, err := os.Stat(dockerfile); err != nil {
			return nil, userr.Usage(fmt.Sprintf("the project %s has no Dockerfile", o.Dir),
				"add kubebuilder's Dockerfile to the project, or build the fast way (host Go, scratch image) with LABCTL_BUILD=fast")
		}
		o.Progress("%s build", o.Engine.Name)
		if err := runBuild(ctx, o, dockerfile, o.Dir); err != nil {
			return nil, err
		}
	default:
		return nil, userr.Usage(fmt.Sprintf("unknown build mode %q", o.Mode), "use dockerfile or fast")
	}
	ref := o.Engine.LocalName(o.Tag)
	id, err := o.Engine.ImageID(ctx, ref)
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("%s built the image but cannot find %s: %s", o.Engine.Name, ref, userr.Message(err)),
			fmt.Sprintf("check `%s images`", o.Engine.Name))
	}
	return &Image{Ref: ref, ID: id}, nil
}

// runBuild runs `<engine> build`, keeping the log's tail for the error.
func runBuild(ctx context.Context, o BuildOptions, dockerfile, contextDir string) error {
	tail := &engine.TailBuffer{Max: 64 << 10}
	var w io.Writer = tail
	if o.Log != nil {
		w = io.MultiWriter(tail, o.Log)
	}
	err := o.Engine.Build(ctx, o.Tag, dockerfile, contextDir, w)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return failedWithLog(fmt.Sprintf("`%s build` of %s failed", o.Engine.Name, o.Tag), tail.String(), err,
		fmt.Sprintf("fix the error above, or run `%s build -t %s .` in %s to see the whole log", o.Engine.Name, o.Tag, o.Dir))
}

// LogTail is the cause of a failed build with the last lines of its log;
// PrintLogTail shows them once the progress line has ended.
type LogTail struct {
	Lines []string
	Err   error
}

func (e *LogTail) Error() string { return e.Err.Error() }
func (e *LogTail) Unwrap() error { return e.Err }

// PrintLogTail writes the build log's last lines carried by err, if any.
func PrintLogTail(w io.Writer, err error) {
	var lt *LogTail
	if !errors.As(err, &lt) || len(lt.Lines) == 0 {
		return
	}
	fmt.Fprintln(w, "last lines of the build log:")
	for _, l := range lt.Lines {
		fmt.Fprintln(w, "  "+l)
	}
}

// failedWithLog returns a one-line error that ends with the last lines of
// the log, carrying more of them for PrintLogTail.
func failedWithLog(what, log string, cause error, next string) error {
	lines := engine.LastLines(log, 12)
	last := lines
	if len(last) > 3 {
		last = last[len(last)-3:]
	}
	detail := strings.Join(last, " | ")
	if detail == "" {
		detail = userr.Message(cause)
	}
	return userr.Wrap(&LogTail{Lines: lines, Err: cause}, userr.ExitFailure, what+": "+detail, next)
}

// mainPackage finds the manager's main package: kubebuilder v4 has
// cmd/main.go, older layouts main.go at the root.
func mainPackage(dir string) (string, error) {
	for _, c := range []struct{ file, pkg string }{{"cmd/main.go", "./cmd"}, {"main.go", "."}} {
		if _, err := os.Stat(filepath.Join(dir, c.file)); err == nil {
			return c.pkg, nil
		}
	}
	return "", userr.Usage(fmt.Sprintf("the project %s has no cmd/main.go (or main.go)", dir),
		"point --project at a kubebuilder project (kubebuilder v4 puts the manager in cmd/main.go)")
}

func buildFast(ctx context.Context, o BuildOptions) error {
	pkg, err := mainPackage(o.Dir)
	if err != nil {
		return err
	}
	goBin := o.Go
	if goBin == "" {
		goBin = "go"
	}
	if _, err := o.Engine.Runner.LookPath(goBin); err != nil {
		return userr.Env("Go is not installed (the fast build compiles the manager with it)",
			"install Go 1.24 or newer from https://go.dev/dl, or build with the project's Dockerfile")
	}
	arch := o.Arch
	if arch == "" {
		arch = runtime.GOARCH
		if f, err := o.Engine.Facts(ctx); err == nil && f.Arch != "" {
			arch = f.Arch
		}
	}
	tmp, err := os.MkdirTemp("", "labctl-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	o.Progress("go build %s", pkg)
	tail := &engine.TailBuffer{Max: 64 << 10}
	var w io.Writer = tail
	if o.Log != nil {
		w = io.MultiWriter(tail, o.Log)
	}
	err = o.Engine.Runner.Run(ctx, engine.Cmd{
		Name:   goBin,
		Args:   []string{"build", "-o", filepath.Join(tmp, "manager"), pkg},
		Dir:    o.Dir,
		Env:    []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch},
		Stdout: w, Stderr: w,
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ee *engine.ExitError
		if !errors.As(err, &ee) {
			return userr.Wrap(err, userr.ExitEnvironment, "cannot run go: "+err.Error(), "check your Go installation (`go version`)")
		}
		return failedWithLog("`go build` of the manager failed", tail.String(), err,
			fmt.Sprintf("fix the compile error above (`go build %s` in %s shows it)", pkg, o.Dir))
	}
	if err := os.WriteFile(filepath.Join(tmp, "Dockerfile"), []byte(scratchDockerfile), 0o644); err != nil {
		return err
	}
	o.Progress("%s build (scratch image)", o.Engine.Name)
	return runBuild(ctx, o, filepath.Join(tmp, "Dockerfile"), tmp)
}

// Reference grammar, after the distribution/reference package: an
// optional registry host, lowercase path components, an optional tag.
var (
	domainRe    = `(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?)`
	componentRe = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
	tagRe       = `[\w][\w.-]{0,127}`
	refPattern  = regexp.MustCompile(`^(?:` + domainRe + `/)?` + componentRe + `(?:/` + componentRe + `)*(?::` + tagRe + `)?$`)
)

// ValidateRef checks an image name such as postgres-operator:latest or
// registry.example.com:5000/team/op:v1 (no digest: labctl builds tags).
func ValidateRef(ref string) error {
	if ref == "" || len(ref) > 255 || !refPattern.MatchString(ref) {
		return userr.Usage(fmt.Sprintf("invalid image name %q", ref),
			"use lowercase letters, digits, '.', '_' and '-' with an optional :tag, e.g. postgres-operator:latest")
	}
	return nil
}

// DefaultTag is the image name labctl builds for a project: NAME:latest,
// as the course's `make docker-build IMG=postgres-operator:latest`.
func DefaultTag(projectName string) string { return projectName + ":latest" }
