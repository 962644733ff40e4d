package testkind

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/labctl/labctl/internal/engine"
)

// Labels kind's providers find node containers by.
const (
	ClusterLabel = "io.x-k8s.kind.cluster"
	RoleLabel    = "io.x-k8s.kind.role"
)

// readyPattern is kind's own wait for a node (NodeReachedCgroupsReadyRegexp):
// the node's init prints a matching line once containerd has booted.
var readyPattern = regexp.MustCompile("Reached target .*Multi-User System.*|detected cgroup v1")

// containerdConfig makes containerd use the native snapshotter: it copies
// layers instead of mounting overlays, so it works in a container on any
// storage driver. The CRI's snapshotter is what kind's nodeutils reads
// (`containerd config dump`, config version 3: cri.v1.images) and passes
// to `ctr images import --snapshotter`; the transfer service behind that
// import unpacks only for the platforms and snapshotters listed in its
// unpack_config (default: overlayfs), else "no unpack platforms defined".
func containerdConfig(arch string) string {
	return `version = 3

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"

[plugins."io.containerd.transfer.v1.local"]
  [[plugins."io.containerd.transfer.v1.local".unpack_config]]
    platform = "linux/` + arch + `"
    snapshotter = "native"
    differ = "walking"
`
}

const crictlConfig = `runtime-endpoint: unix:///run/containerd/containerd.sock
image-endpoint: unix:///run/containerd/containerd.sock
timeout: 30
`

const dockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
ENTRYPOINT ["/bin/init"]
`

// Engine is a container engine (docker or podman) the tests drive for real.
type Engine struct {
	Name string
	// Path is the engine's own executable.
	Path string
	// Refused is what the engine answered when asked for a privileged
	// container ("" when it runs them); see AllowPrivileged.
	Refused string
}

// Setup returns the named engine when its daemon (or service) answers,
// else skips the test saying why.
func Setup(t testing.TB, name string) *Engine {
	t.Helper()
	if testing.Short() {
		t.Skipf("runs real %s containers: not in -short", name)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed: skipping the real %s path", name, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), engine.InfoTimeout*2)
	defer cancel()
	if p := engine.ProbeEngine(ctx, engine.OSRunner{}, name); !p.Usable() {
		t.Skipf("%s does not answer: %v", name, p.Err)
	}
	return &Engine{Name: name, Path: path}
}

// Run runs the engine with args, returning its stdout; the error carries
// stderr.
func (e *Engine) Run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, e.Name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", e.Name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Exec runs a command in a container (without --privileged).
func (e *Engine) Exec(ctx context.Context, container string, args ...string) ([]byte, error) {
	return e.Run(ctx, append([]string{"exec", container}, args...)...)
}

// NodeImage builds the node image (binaries from the cache, else built
// first) and removes it when the test ends.
func (e *Engine) NodeImage(t testing.TB, ctx context.Context, v Versions) string {
	t.Helper()
	start := time.Now()
	bins, err := Binaries(ctx, v, nil)
	if err != nil {
		t.Fatalf("cannot build the node's containerd, ctr and crictl: %v", err)
	}
	t.Logf("node binaries %s ready in %s", filepath.Base(bins), time.Since(start).Round(time.Millisecond))
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	tools := filepath.Join(dir, "nodetools")
	if err := buildNodeTools(ctx, tools); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, b := range Executables {
		files["usr/local/bin/"+b] = filepath.Join(bins, b)
	}
	for _, tool := range []string{"init", "cat", "mkdir", "cp"} {
		files["bin/"+tool] = tools
	}
	for dst, src := range files {
		if err := copyFile(src, filepath.Join(rootfs, dst), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for dst, content := range map[string]string{
		"etc/containerd/config.toml": containerdConfig(runtime.GOARCH),
		"etc/crictl.yaml":            crictlConfig,
		"kind/version":               v.Kubernetes + "\n",
	} {
		p := filepath.Join(rootfs, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := "labctl-testkind-node:" + randomHex(4)
	start = time.Now()
	if _, err := e.Run(ctx, "build", "-t", tag, dir); err != nil {
		t.Fatalf("cannot build the node image: %v", err)
	}
	// Podman stores it as localhost/NAME: kind's Podman provider would
	// look for docker.io/library/NAME and try to pull it.
	ref := engine.New(e.Name, nil).LocalName(tag)
	t.Logf("node image %s built in %s", ref, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { e.RemoveImage(t, ref) })
	return ref
}

// notFound: the engine says there is no such image or container.
func notFound(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "no such") || strings.Contains(msg, "not known")
}

// RemoveImage removes an image (name or ID), failing the test when the engine cannot.
func (e *Engine) RemoveImage(t testing.TB, ref string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.Run(ctx, "rmi", "-f", ref); err != nil && !notFound(err) {
		t.Errorf("cleanup: %v", err)
	}
}

// buildNodeTools compiles ./nodetools statically into out.
func buildNodeTools(ctx context.Context, out string) error {
	_, self, _, _ := runtime.Caller(0)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./nodetools")
	cmd.Dir = filepath.Dir(self)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build of the node's init: %w: %s", err, b)
	}
	return nil
}

// AllowPrivileged makes sure the engine runs privileged containers, as
// kind's `run --privileged` and `exec --privileged` need. When the host
// refuses them (a VM whose capability bounding set lacks CAP_SYS_RESOURCE,
// which Docker grants privileged containers: runc answers "unable to apply
// caps: operation not permitted"; Podman raises every container's nofile
// and nproc limits, which needs that capability too: "error setting
// rlimit type 7: operation not permitted"), it says so in the log and puts
// a wrapper first on PATH: `run --privileged` gets every capability the
// host has instead, `exec --privileged` keeps the container's, and a
// Podman `run` keeps conmon's hard limits. Everything else reaches
// the engine as kind sent it.
func (e *Engine) AllowPrivileged(t testing.TB, ctx context.Context, image string) {
	t.Helper()
	probe := []string{"run", "--rm", "--privileged", "--entrypoint", "/bin/cat", image, "/kind/version"}
	_, err := e.Run(ctx, probe...)
	if err == nil {
		return
	}
	if !strings.Contains(err.Error(), "operation not permitted") {
		t.Fatalf("the engine cannot run the node image: %v", err)
	}
	e.Refused = err.Error()
	missing, err2 := missingCapabilities()
	if err2 != nil {
		t.Fatalf("this host refuses privileged containers (%v) and its capabilities cannot be read: %v", err, err2)
	}
	var runExtra []string
	if e.Name == engine.Podman {
		if runExtra, err2 = e.podmanLimits(ctx, image); err2 != nil {
			t.Fatal(err2)
		}
	}
	t.Logf("this host refuses privileged containers: %v", firstLine(e.Refused))
	t.Logf("so kind's --privileged becomes --cap-add=ALL --cap-drop=%s for run and is dropped for exec; run also gets %v",
		strings.Join(missing, ","), runExtra)
	dir := t.TempDir()
	shim := privilegeShim(e.Path, firstLine(e.Refused), missing, runExtra)
	if err := os.WriteFile(filepath.Join(dir, e.Name), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if _, err := e.Run(ctx, probe...); err != nil {
		t.Fatalf("even with every capability the host grants, the node image does not run: %v", err)
	}
}

// privilegeShim is a wrapper for the engine at realPath: `run --privileged`
// becomes `run --cap-add=ALL --cap-drop=<missing>...` with runExtra
// after `run`, `exec --privileged` loses the flag, the rest passes as is.
func privilegeShim(realPath, why string, missing, runExtra []string) string {
	return fmt.Sprintf(`#!/bin/sh
# testkind: the host refuses --privileged (%s).
sub=$1
shift
if [ "$sub" = run ]; then set -- %s "$@"; fi
for a do
  shift
  if [ "$a" = --privileged ]; then
    if [ "$sub" = run ]; then set -- "$@" --cap-add=ALL --cap-drop=%s; fi
  else
    set -- "$@" "$a"
  fi
done
exec %s "$sub" "$@"
`, strings.ReplaceAll(why, "\n", " "), strings.Join(runExtra, " "), strings.Join(missing, " --cap-drop="), realPath)
}

// podmanLimits are --ulimit flags for a Podman `run` that keep nofile and
// nproc at the hard limits of conmon, the process runc starts from:
// raising them needs CAP_SYS_RESOURCE. Podman lowers its own nproc before
// starting conmon, so conmon's is read from a probe container (started
// with limits low enough to be allowed).
func (e *Engine) podmanLimits(ctx context.Context, image string) ([]string, error) {
	out, err := e.Run(ctx, "run", "-d", "-i", "--ulimit=nofile=1024:1024", "--ulimit=nproc=1024:1024", "--entrypoint", "/bin/cat", image)
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(string(out))
	defer func() { _, _ = e.Run(context.WithoutCancel(ctx), "rm", "-f", id) }()
	out, err = e.Run(ctx, "inspect", "--format", "{{.State.ConmonPid}}", id)
	if err != nil {
		return nil, err
	}
	limits, err := os.ReadFile("/proc/" + strings.TrimSpace(string(out)) + "/limits")
	if err != nil {
		return nil, fmt.Errorf("conmon's limits: %w", err)
	}
	var flags []string
	for _, l := range []struct{ name, row string }{{"nofile", "Max open files"}, {"nproc", "Max processes"}} {
		hard := ""
		for _, line := range strings.Split(string(limits), "\n") {
			if rest, ok := strings.CutPrefix(line, l.row); ok {
				if f := strings.Fields(rest); len(f) >= 2 {
					hard = f[1]
				}
			}
		}
		if hard == "" || hard == "unlimited" {
			return nil, fmt.Errorf("conmon's %s limit not found in %s", l.name, limits)
		}
		flags = append(flags, fmt.Sprintf("--ulimit=%s=%s:%s", l.name, hard, hard))
	}
	return flags, nil
}

// capabilityNames are the Linux capabilities by number (0..40).
var capabilityNames = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
	"LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
	"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
	"MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ",
}

// missingCapabilities names the capabilities (of those every engine knows)
// outside this process's bounding set.
func missingCapabilities() ([]string, error) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	var bnd uint64
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "CapBnd:"); ok {
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%x", &bnd); err != nil {
				return nil, err
			}
		}
	}
	return capabilitiesOutside(bnd)
}

// capabilitiesOutside names the capabilities missing from a bounding set
// (an error when none is).
func capabilitiesOutside(bnd uint64) ([]string, error) {
	var missing []string
	for i, n := range capabilityNames {
		if bnd&(1<<i) == 0 {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil, fmt.Errorf("the bounding set %x lacks none of them", bnd)
	}
	return missing, nil
}

// StartNode runs a node container of kind cluster `cluster` as kind's
// provider would find it (its labels, name CLUSTER-control-plane, the
// tmpfs and /var volume kind gives a node) and waits until containerd
// serves. It is removed, with its volume, when the test ends.
func (e *Engine) StartNode(t testing.TB, ctx context.Context, image, cluster string) string {
	t.Helper()
	name := cluster + "-control-plane"
	args := []string{"run", "-d", "--name", name, "--hostname", name,
		"--label", ClusterLabel + "=" + cluster, "--label", RoleLabel + "=control-plane",
		"--privileged", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--tmpfs", "/tmp", "--tmpfs", "/run", "--volume", "/var", image}
	t.Cleanup(func() { e.RemoveContainer(t, name) })
	if _, err := e.Run(ctx, args...); err != nil {
		t.Fatalf("cannot start the node container: %v", err)
	}
	if err := e.WaitReady(ctx, name, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return name
}

// WaitReady follows the container's log until the node's init says
// containerd is up (kind's own wait), or the container ends.
func (e *Engine) WaitReady(ctx context.Context, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Name, "logs", "-f", name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	var tail []string
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if readyPattern.MatchString(sc.Text()) {
			return nil
		}
		tail = append(tail, sc.Text())
		if len(tail) > 8 {
			tail = tail[1:]
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("node %s: containerd did not come up within %s; last log lines: %s", name, timeout, strings.Join(tail, " | "))
	}
	return fmt.Errorf("node %s ended before containerd came up; last log lines: %s", name, strings.Join(tail, " | "))
}

// RemoveContainer removes a container and its anonymous volumes.
func (e *Engine) RemoveContainer(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.Run(ctx, "rm", "-f", "-v", name); err != nil && !notFound(err) {
		t.Errorf("cleanup: %v", err)
	}
}

// RemoveVolumes removes the volumes labelled with a node's name, as kind's
// Podman provider labels the one it makes for a node's /var (left behind
// when kind's delete did not run).
func (e *Engine) RemoveVolumes(t testing.TB, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := e.Run(ctx, "volume", "ls", "-q", "--filter", "label="+node)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for _, v := range strings.Fields(string(out)) {
		if _, err := e.Run(ctx, "volume", "rm", "-f", v); err != nil && !notFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// CRIImage is an image as the node's CRI (crictl) lists it.
type CRIImage struct {
	ID       string   `json:"id"`
	RepoTags []string `json:"repoTags"`
}

// RandomName is prefix plus 8 random hex digits (kind cluster names must be
// lowercase).
func RandomName(prefix string) string { return prefix + randomHex(4) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// CRIImages lists the node's images through its CRI, as the kubelet sees
// them (`crictl images -o json`).
func (e *Engine) CRIImages(ctx context.Context, node string) ([]CRIImage, error) {
	out, err := e.Exec(ctx, node, "crictl", "--runtime-endpoint", "unix:///run/containerd/containerd.sock", "images", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Images []CRIImage `json:"images"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("crictl images on %s: %w", node, err)
	}
	return list.Images, nil
}

// CRIImageID is the ID of the node's image tagged ref (normalised as the
// CRI does: docker.io/library/NAME:TAG), "" when the node has none.
func (e *Engine) CRIImageID(ctx context.Context, node, normalizedRef string) (string, error) {
	imgs, err := e.CRIImages(ctx, node)
	if err != nil {
		return "", err
	}
	for _, img := range imgs {
		for _, tag := range img.RepoTags {
			if tag == normalizedRef {
				return img.ID, nil
			}
		}
	}
	return "", nil
}
