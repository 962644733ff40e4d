package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/labctl/labctl/internal/userr"
)

// Engine names.
const (
	Docker = "docker"
	Podman = "podman"
)

// EnvProvider is the variable kind's own CLI reads to pick its node
// provider; labctl honours it the same way.
const EnvProvider = "KIND_EXPERIMENTAL_PROVIDER"

// Names lists the supported engines in detection order.
var Names = []string{Docker, Podman}

// InfoTimeout bounds `<engine> info`: a wedged daemon must not hang labctl.
var InfoTimeout = 20 * time.Second

// Engine is a container engine CLI.
type Engine struct {
	Name   string
	Runner Runner
	// Version is the server version reported by info (set by Detect).
	Version string

	factsMu sync.Mutex
	facts   *Facts
}

// New returns the named engine using r (OSRunner when nil).
func New(name string, r Runner) *Engine {
	if r == nil {
		r = OSRunner{}
	}
	return &Engine{Name: name, Runner: r}
}

func (e *Engine) cmd(args ...string) Cmd { return Cmd{Name: e.Name, Args: args} }

// run runs the engine with args, returning stdout.
func (e *Engine) run(ctx context.Context, args ...string) ([]byte, error) {
	return Output(ctx, e.Runner, e.Name, args...)
}

// Info asks the engine's daemon (or, for Podman, its service) for its
// version; an error means the engine cannot run containers now.
func (e *Engine) Info(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, InfoTimeout)
	defer cancel()
	format := "{{.ServerVersion}}"
	if e.Name == Podman {
		format = "{{.Version.Version}}"
	}
	out, err := e.run(ctx, "info", "--format", format)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("`%s info` did not answer within %s", e.Name, InfoTimeout)
		}
		return "", err
	}
	v := strings.TrimSpace(string(out))
	if v == "" || strings.Contains(v, "<no value>") {
		return "", fmt.Errorf("`%s info` reported no server version", e.Name)
	}
	return v, nil
}

// LocalName is the name the engine stores a locally built image under.
// Podman puts unqualified names under localhost/ (postgres-operator:latest
// becomes localhost/postgres-operator:latest); Docker keeps them as given.
// The Deployment must use this name, or kind's nodes look for it on Docker
// Hub and the pod ends in ErrImagePull.
func (e *Engine) LocalName(ref string) string {
	if e.Name != Podman || hasDomain(ref) {
		return ref
	}
	return "localhost/" + ref
}

// hasDomain reports whether ref's first path component is a registry
// host (contains '.' or ':', or is localhost).
func hasDomain(ref string) bool {
	first, _, found := strings.Cut(ref, "/")
	if !found {
		return false
	}
	return first == "localhost" || strings.ContainsAny(first, ".:")
}

// ImageID returns the image's ID as "sha256:<hex>"; the error wraps
// ErrNoImage when the engine does not have it.
func (e *Engine) ImageID(ctx context.Context, ref string) (string, error) {
	out, err := e.run(ctx, "image", "inspect", "--format", "{{.Id}}", ref)
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%s has no image %s: %w (%v)", e.Name, ref, ErrNoImage, err)
		}
		return "", err
	}
	return NormalizeID(string(out)), nil
}

// ErrNoImage means the engine does not have the image.
var ErrNoImage = errors.New("no such image")

// ErrNoEngine is wrapped by Detect's error when it looked for any engine
// and none works: a machine without kind clusters, not a failure of one.
var ErrNoEngine = errors.New("no working container engine")

// NormalizeID turns Docker's "sha256:<hex>" and Podman's "<hex>" into one
// form.
func NormalizeID(id string) string {
	id = strings.TrimSpace(id)
	if id != "" && !strings.Contains(id, ":") {
		id = "sha256:" + id
	}
	return id
}

// Build runs `<engine> build -t tag -f dockerfile contextDir`, writing the
// build's output to log. Docker builds without attestation manifests
// (provenance, SBOM): with the containerd image store they become extra
// manifests whose blobs `docker save` may leave out, and kind's
// `ctr images import --all-platforms` then fails on them.
func (e *Engine) Build(ctx context.Context, tag, dockerfile, contextDir string, log io.Writer) error {
	c := e.cmd("build", "-t", tag, "-f", dockerfile, contextDir)
	if e.Name == Docker {
		c.Env = []string{"BUILDX_NO_DEFAULT_ATTESTATIONS=1"}
	}
	c.Stdout, c.Stderr = log, log
	return e.Runner.Run(ctx, c)
}

// Save streams the image to w as a Docker archive (the format kind's
// nodes import); Podman needs --format docker-archive for that. The
// archive comes through labctl's own pipe, never a file the engine writes:
// Docker from snap has a private /tmp that labctl cannot see.
func (e *Engine) Save(ctx context.Context, ref string, w io.Writer) error {
	args := []string{"save"}
	if e.Name == Podman {
		args = append(args, "--format", "docker-archive")
	}
	c := e.cmd(append(args, ref)...)
	c.Stdout = w
	return e.Runner.Run(ctx, c)
}

// Exec runs a command in a container, streaming its stdout to w.
func (e *Engine) Exec(ctx context.Context, container string, w io.Writer, args ...string) error {
	c := e.cmd(append([]string{"exec", container}, args...)...)
	c.Stdout = w
	return e.Runner.Run(ctx, c)
}

// Container is what labctl needs to know about a container.
type Container struct {
	Exists  bool
	Running bool
	// Labels are the container's labels.
	Labels map[string]string
}

// InspectContainer describes the named container; Exists is false when
// there is none.
func (e *Engine) InspectContainer(ctx context.Context, name string) (*Container, error) {
	out, err := e.run(ctx, "inspect", "--type", "container", "--format", "{{.State.Running}}{{range $k, $v := .Config.Labels}}\n{{$k}}={{$v}}{{end}}", name)
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) && isNoSuchContainer(ee.Stderr) {
			return &Container{}, nil
		}
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	c := &Container{Exists: true, Running: strings.TrimSpace(lines[0]) == "true", Labels: map[string]string{}}
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, "="); ok {
			c.Labels[k] = v
		}
	}
	return c, nil
}

func isNoSuchContainer(stderr string) bool {
	s := strings.ToLower(stderr)
	return strings.Contains(s, "no such") || strings.Contains(s, "not known") || strings.Contains(s, "not found")
}

// Start starts stopped containers.
func (e *Engine) Start(ctx context.Context, names ...string) error {
	_, err := e.run(ctx, append([]string{"start"}, names...)...)
	return err
}

// Probe is what detection found out about one engine.
type Probe struct {
	Name      string
	Installed bool
	Version   string // server version when running
	Err       error  // why it is not usable (not installed, daemon down)
}

// Usable reports whether the engine can run containers.
func (p Probe) Usable() bool { return p.Installed && p.Err == nil }

// ProbeEngine checks one engine: on PATH, and `info` works.
func ProbeEngine(ctx context.Context, r Runner, name string) Probe {
	if r == nil {
		r = OSRunner{}
	}
	p := Probe{Name: name}
	if _, err := r.LookPath(name); err != nil {
		p.Err = fmt.Errorf("%s is not installed (not found on PATH)", name)
		return p
	}
	p.Installed = true
	v, err := New(name, r).Info(ctx)
	if err != nil {
		p.Err = err
		return p
	}
	p.Version = v
	return p
}

// Options steer Detect.
type Options struct {
	// Explicit is the --engine value ("" = choose).
	Explicit string
	// Getenv reads KIND_EXPERIMENTAL_PROVIDER (os.Getenv when nil).
	Getenv func(string) string
}

// Detect picks the engine: --engine, else KIND_EXPERIMENTAL_PROVIDER, else
// the first of docker and podman whose `info` succeeds. Errors are user
// errors that say what to do.
func Detect(ctx context.Context, r Runner, opts Options) (*Engine, error) {
	if r == nil {
		r = OSRunner{}
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if opts.Explicit != "" {
		return detectOne(ctx, r, opts.Explicit, "--engine")
	}
	if v := strings.TrimSpace(getenv(EnvProvider)); v != "" {
		return detectOne(ctx, r, v, EnvProvider)
	}
	var probes []Probe
	for _, n := range Names {
		p := ProbeEngine(ctx, r, n)
		if p.Usable() {
			e := New(n, r)
			e.Version = p.Version
			return e, nil
		}
		probes = append(probes, p)
	}
	return nil, noEngineError(probes)
}

func detectOne(ctx context.Context, r Runner, name, source string) (*Engine, error) {
	if name != Docker && name != Podman {
		return nil, userr.Usage(fmt.Sprintf("%s=%s is not a container engine labctl supports", source, name),
			"use docker or podman (or unset "+EnvProvider+")")
	}
	p := ProbeEngine(ctx, r, name)
	if !p.Installed {
		return nil, userr.Env(fmt.Sprintf("%s is not installed (%s asks for it)", name, source),
			fmt.Sprintf("install %s, pick the other engine, or use `--provider local` (no engine needed)", name))
	}
	if p.Err != nil {
		return nil, userr.Wrap(p.Err, userr.ExitEnvironment, fmt.Sprintf("%s is installed but not running (%s)", name, reason(p.Err)), startHint(name))
	}
	e := New(name, r)
	e.Version = p.Version
	return e, nil
}

func noEngineError(probes []Probe) error {
	var installed []Probe
	for _, p := range probes {
		if p.Installed {
			installed = append(installed, p)
		}
	}
	if len(installed) == 0 {
		return userr.Wrap(ErrNoEngine, userr.ExitEnvironment, "no container engine: neither docker nor podman is installed",
			"install Docker or Podman for kind clusters, or use `--provider local` (needs only Go)")
	}
	p := installed[0]
	return userr.Wrap(errors.Join(ErrNoEngine, p.Err), userr.ExitEnvironment, fmt.Sprintf("%s is installed but not running (%s)", p.Name, reason(p.Err)), startHint(p.Name))
}

// Reason summarises why probes found no usable engine, for the provider
// auto-detection message.
func Reason(probes []Probe) string {
	var parts []string
	for _, p := range probes {
		if p.Installed {
			parts = append(parts, p.Name+" not running")
		}
	}
	if len(parts) == 0 {
		return "no container engine installed"
	}
	return "no container engine running: " + strings.Join(parts, ", ")
}

func reason(err error) string {
	var ee *ExitError
	if errors.As(err, &ee) {
		if l := LastLine(ee.Stderr); l != "" {
			return l
		}
	}
	return err.Error()
}

func startHint(name string) string {
	if name == Podman {
		return "start it (`podman machine start` on macOS/Windows, or check `podman info`), or use `--provider local`"
	}
	return "start the Docker daemon (`sudo systemctl start docker`, or open Docker Desktop), or use `--provider local`"
}
