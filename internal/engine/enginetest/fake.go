// Package enginetest fakes a container engine CLI and kind's node
// containers for tests: the fake engine answers scripted commands, the fake
// nodes simulate containerd's image store (ctr import, crictl inspecti).
package enginetest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/labctl/labctl/internal/engine"
)

// Runner is a fake engine.Runner. Commands are matched by prefix of their
// command line (the last matching handler wins); unmatched commands fail
// the way a missing subcommand would, and are recorded like all others.
type Runner struct {
	// Trace, when set, sees every command line (to check ordering
	// against fake nodes).
	Trace func(string)

	mu       sync.Mutex
	paths    map[string]bool
	handlers []handler
	calls    []string
}

type handler struct {
	prefix string
	fn     func(engine.Cmd) error
}

// NewRunner returns a fake with the given executables "on PATH".
func NewRunner(installed ...string) *Runner {
	r := &Runner{paths: map[string]bool{}}
	for _, n := range installed {
		r.paths[n] = true
	}
	return r
}

// LookPath implements engine.Runner.
func (r *Runner) LookPath(file string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paths[file] {
		return "/usr/bin/" + file, nil
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", file)
}

// Run implements engine.Runner.
func (r *Runner) Run(ctx context.Context, c engine.Cmd) error {
	line := Line(c)
	r.mu.Lock()
	r.calls = append(r.calls, line)
	var fn func(engine.Cmd) error
	for i := len(r.handlers) - 1; i >= 0; i-- {
		if strings.HasPrefix(line, r.handlers[i].prefix) {
			fn = r.handlers[i].fn
			break
		}
	}
	r.mu.Unlock()
	if r.Trace != nil {
		r.Trace(line)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if fn == nil {
		return Fail(c, 125, "fake engine: unexpected command: "+line)
	}
	return fn(c)
}

// Line is the command line a handler prefix is matched against: name and
// arguments separated by single spaces.
func Line(c engine.Cmd) string { return strings.TrimSpace(c.Name + " " + strings.Join(c.Args, " ")) }

// On registers fn for commands starting with prefix.
func (r *Runner) On(prefix string, fn func(engine.Cmd) error) *Runner {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers = append(r.handlers, handler{prefix: prefix, fn: fn})
	return r
}

// OnOutput answers commands starting with prefix with stdout.
func (r *Runner) OnOutput(prefix, stdout string) *Runner {
	return r.On(prefix, func(c engine.Cmd) error {
		if c.Stdout != nil {
			_, _ = io.WriteString(c.Stdout, stdout)
		}
		return nil
	})
}

// OnFail makes commands starting with prefix exit with code and stderr.
func (r *Runner) OnFail(prefix string, code int, stderr string) *Runner {
	return r.On(prefix, func(c engine.Cmd) error { return Fail(c, code, stderr) })
}

// Fail returns what a real runner returns for a command that exited
// non-zero, writing stderr where the command wanted it.
func Fail(c engine.Cmd, code int, stderr string) error {
	if c.Stderr != nil {
		_, _ = io.WriteString(c.Stderr, stderr)
		return &engine.ExitError{Command: c.String(), Code: code}
	}
	return &engine.ExitError{Command: c.String(), Code: code, Stderr: stderr}
}

// Calls returns the command lines run so far.
func (r *Runner) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// Called reports how many commands started with prefix.
func (r *Runner) Called(prefix string) int {
	n := 0
	for _, c := range r.Calls() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// Running scripts `<name> info` to succeed with version.
func (r *Runner) Running(name, version string) *Runner {
	r.mu.Lock()
	r.paths[name] = true
	r.mu.Unlock()
	return r.OnOutput(name+" info", version+"\n")
}

// DaemonDown scripts `<name> info` to fail as Docker's client does when
// its daemon is not running.
func (r *Runner) DaemonDown(name string) *Runner {
	r.mu.Lock()
	r.paths[name] = true
	r.mu.Unlock()
	msg := "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n"
	if name == engine.Podman {
		msg = "Error: unable to connect to Podman socket: Get \"http://d/v4.3.1/libpod/_ping\": dial unix /run/user/1000/podman/podman.sock: connect: no such file or directory\n"
	}
	return r.OnFail(name+" info", 1, msg)
}

// Image is an image in a fake engine's store.
type Image struct {
	Ref string
	// Config is the config blob: its sha256 is the image ID.
	Config []byte
	// Files are the layer's files (path → content).
	Files map[string]string
}

// ID is the image ID: sha256 of the config.
func (i Image) ID() string {
	sum := sha256.Sum256(i.Config)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Store is a fake engine's image store: `image inspect` and `save -o`
// work from it.
type Store struct {
	mu     sync.Mutex
	images map[string]Image
	// IDWithoutPrefix makes `image inspect` answer like Podman (<hex>).
	IDWithoutPrefix bool
	// SaveConfig, when set, returns the config written into saved
	// archives (Podman converting it: the archive's ID then differs from
	// the engine's).
	SaveConfig func(img Image) []byte
	// ContainerdStore makes `image inspect` answer like Docker with the
	// containerd image store: the ID is the image index's digest, never
	// the config digest kind's nodes report.
	ContainerdStore bool
}

// IndexDigest is the ID Docker's containerd image store gives img.
func (i Image) IndexDigest() string {
	sum := sha256.Sum256(append([]byte("index:"), i.Config...))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Put adds or replaces an image.
func (s *Store) Put(img Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.images == nil {
		s.images = map[string]Image{}
	}
	s.images[img.Ref] = img
}

// Get returns an image by exact name.
func (s *Store) Get(ref string) (Image, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, ok := s.images[ref]
	return img, ok
}

// Attach wires `<name> image inspect` and `<name> save` to the store.
func (s *Store) Attach(r *Runner, name string) {
	r.On(name+" image inspect", func(c engine.Cmd) error {
		ref := c.Args[len(c.Args)-1]
		img, ok := s.Get(ref)
		if !ok {
			return Fail(c, 125, "Error: inspecting object: "+ref+": image not known\n")
		}
		id := img.ID()
		if s.ContainerdStore {
			id = img.IndexDigest()
		}
		if s.IDWithoutPrefix {
			id = strings.TrimPrefix(id, "sha256:")
		}
		_, _ = io.WriteString(c.Stdout, id+"\n")
		return nil
	})
	r.On(name+" save", func(c engine.Cmd) error {
		ref := c.Args[len(c.Args)-1]
		out := ""
		for i, a := range c.Args {
			if a == "-o" {
				out = c.Args[i+1]
			}
		}
		img, ok := s.Get(ref)
		if !ok {
			return Fail(c, 125, "Error: "+ref+": image not known\n")
		}
		if s.SaveConfig != nil {
			img.Config = s.SaveConfig(img)
		}
		raw, err := DockerArchive(img)
		if err != nil {
			return err
		}
		if out == "" {
			_, err = c.Stdout.Write(raw)
			return err
		}
		return os.WriteFile(out, raw, 0o644)
	})
}

// DockerArchive writes img as `docker save` does (the pre-25 layout:
// manifest.json, <id>.json config, one layer tar).
func DockerArchive(img Image) ([]byte, error) {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	for name, content := range img.Files {
		if err := lw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(lw, content); err != nil {
			return nil, err
		}
	}
	if err := lw.Close(); err != nil {
		return nil, err
	}
	id := strings.TrimPrefix(img.ID(), "sha256:")
	sum := sha256.Sum256(layer.Bytes())
	layerName := hex.EncodeToString(sum[:]) + ".tar"
	manifest, _ := json.Marshal([]map[string]any{{"Config": id + ".json", "RepoTags": []string{img.Ref}, "Layers": []string{layerName}}})
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {id + ".json", img.Config}, {layerName, layer.Bytes()}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o444, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Info scripts the engine's host facts (`docker info --format '{{json .}}'`,
// `podman info --format json`) as the real engines report them; name must
// already be Running. Snap Docker shows through its data directory.
func (r *Runner) Info(name string, f engine.Facts) *Runner {
	if name == engine.Podman {
		arch := f.Arch
		cg := ""
		if f.CgroupVersion != "" {
			cg = "v" + f.CgroupVersion
		}
		raw, _ := json.Marshal(map[string]any{
			"host":  map[string]any{"arch": arch, "cgroupVersion": cg, "security": map[string]any{"rootless": f.Rootless}},
			"store": map[string]any{"graphRoot": f.RootDir},
		})
		return r.OnOutput(name+" info --format json", string(raw)+"\n")
	}
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[f.Arch]
	if arch == "" {
		arch = f.Arch
	}
	security := []string{"name=seccomp,profile=builtin"}
	if f.Rootless {
		security = append(security, "name=rootless")
	}
	if f.CgroupVersion == "2" {
		security = append(security, "name=cgroupns")
	}
	root := f.RootDir
	if root == "" {
		root = "/var/lib/docker"
		if f.Snap {
			root = "/var/snap/docker/common/var-lib-docker"
		}
	}
	driverStatus := [][2]string{{"Backing Filesystem", "extfs"}}
	driver := "overlay2"
	if f.ContainerdStore {
		driver = "overlayfs"
		driverStatus = [][2]string{{"driver-type", "io.containerd.snapshotter.v1"}}
	}
	raw, _ := json.Marshal(map[string]any{
		"ServerVersion": "27.1.0", "Driver": driver, "DriverStatus": driverStatus,
		"CgroupVersion": f.CgroupVersion, "CgroupDriver": "systemd", "Architecture": arch,
		"SecurityOptions": security, "DockerRootDir": root, "OSType": "linux",
	})
	return r.OnOutput(name+" info --format {{json .}}", string(raw)+"\n")
}
