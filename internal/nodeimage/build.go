package nodeimage

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/userr"
)

//go:embed kubenode/main.go.tmpl pause/main.go.tmpl node files
var assets embed.FS

// nodeDockerfile turns the Debian root file system (the base image) into a
// node, as kindest/base's Dockerfile does: kind's files, the binaries,
// systemd trimmed to what a node runs, kubelet and containerd enabled.
const nodeDockerfile = `FROM {{BASE}}
COPY rootfs/ /
RUN chmod 755 /kind /kind/bin /kind/bin/* /usr/local/bin/* \
 && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
    /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
    /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \
 && systemctl mask systemd-binfmt.service \
 && mkdir -p /etc/kubernetes/manifests /opt/cni/bin \
 && ln -sf /usr/lib/cni/* /opt/cni/bin/ \
 && for c in kubelet kubeadm kubectl; do ln -sf kubenode /usr/bin/$c; done
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/labctl-entrypoint", "/sbin/init"]
`

// componentDockerfile is one image kubeadm's static pods or kind's
// manifests run: the base file system (glibc, iptables for kube-proxy)
// with one binary, found on PATH under the name the pod's command uses.
const componentDockerfile = `FROM {{BASE}}
COPY {{BIN}} /usr/local/bin/{{BIN}}
{{LINKS}}ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENTRYPOINT {{ENTRYPOINT}}
`

// Build returns the node image for o.Versions, building what is missing:
// each phase reports a progress line, and the image found under its
// content-addressed tag is returned at once.
func Build(ctx context.Context, o Options) (*Result, error) {
	if o.Engine == nil {
		return nil, userr.Env("building a kind node image needs Docker or Podman, and none answers", "start Docker (or Podman) and run the command again")
	}
	if err := o.defaults(); err != nil {
		return nil, userr.Wrap(err, userr.ExitEnvironment, "no cache directory for the node image: "+err.Error(), "set XDG_CACHE_HOME")
	}
	res := &Result{Ref: o.Engine.LocalName(o.Tag)}
	if !o.Force {
		if id, err := o.Engine.ImageID(ctx, o.Tag); err == nil && id != "" {
			o.progress("%s is built already", res.Ref)
			res.Cached = true
			return res, nil
		}
	}
	b := &build{o: o, work: filepath.Join(o.CacheDir, "work-"+Key(o.Versions)[:12])}
	for _, p := range b.phases() {
		start := time.Now()
		o.progress("%s", p.name)
		if err := p.run(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, userr.Wrap(ctx.Err(), userr.ExitInterrupted, "interrupted while building the node image ("+p.name+")", "run the command again: finished steps are cached")
			}
			var u *userr.Error
			if errors.As(err, &u) {
				return nil, err
			}
			return nil, userr.Wrap(err, userr.ExitFailure, "building the node image failed at "+p.name+": "+engine.LastLine(err.Error()),
				"run again with -v for the whole log; finished steps are cached")
		}
		res.Steps = append(res.Steps, Step{Name: p.name, Duration: time.Since(start)})
	}
	return res, nil
}

type phase struct {
	name string
	run  func(context.Context) error
}

// build holds what the phases hand each other.
type build struct {
	o    Options
	work string
	// base is the Debian root file system imported as an image.
	base string
	// bin holds every executable the node and its images carry.
	bin string
	// images are the component images, by the name kubeadm or kind asks.
	images []Component
}

func (b *build) phases() []phase {
	return []phase{
		{"Debian root file system (debootstrap " + b.o.Versions.Debian + ")", b.rootfs},
		{"containerd, ctr, crictl, the runc shim and CoreDNS", b.runtimeBinaries},
		{"kubelet, kubeadm, kubectl and kube-proxy " + b.o.Versions.Kubernetes, b.kubeBinaries},
		{"control-plane binaries", b.controlPlane},
		{"component images", b.componentImages},
		{"node image", b.nodeImage},
		{"preloading the images into the node's containerd", b.preload},
	}
}

func (b *build) run(ctx context.Context, name string, args ...string) error {
	c := engine.Cmd{Name: name, Args: args, Stdout: b.o.Log, Stderr: b.o.Log}
	return b.o.Runner.Run(ctx, c)
}

func (b *build) output(ctx context.Context, name string, args ...string) ([]byte, error) {
	var out bytes.Buffer
	c := engine.Cmd{Name: name, Args: args, Stdout: &out}
	err := b.o.Runner.Run(ctx, c)
	return out.Bytes(), err
}

// rootfs debootstraps the Debian file system once per package list and
// imports it as the base image every other image starts from.
func (b *build) rootfs(ctx context.Context) error {
	b.base = BaseReference(b.o.Versions)
	if id, err := b.o.Engine.ImageID(ctx, b.base); err == nil && id != "" {
		return nil
	}
	if _, err := b.o.Runner.LookPath("debootstrap"); err != nil {
		return userr.Env("debootstrap is needed to build the node's Debian file system, and it is not installed",
			"install it (`apt-get install debootstrap` on Debian or Ubuntu) and run the command again")
	}
	dir := filepath.Join(b.work, "rootfs")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	debs := filepath.Join(b.o.CacheDir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return err
	}
	if err := b.run(ctx, "debootstrap", "--variant=minbase", "--cache-dir="+debs, "--include="+strings.Join(Packages, ","),
		b.o.Versions.Debian, dir, "http://deb.debian.org/debian"); err != nil {
		return fmt.Errorf("debootstrap: %w", err)
	}
	// What a running system regenerates or never needs.
	for _, junk := range []string{"var/cache/apt/archives", "var/lib/apt/lists", "etc/machine-id"} {
		_ = os.RemoveAll(filepath.Join(dir, junk))
	}
	tarball := filepath.Join(b.work, "rootfs.tar")
	if err := b.run(ctx, "tar", "--numeric-owner", "-C", dir, "-cf", tarball, "."); err != nil {
		return fmt.Errorf("tar of the root file system: %w", err)
	}
	defer os.Remove(tarball)
	return b.run(ctx, b.o.Engine.Name, "import", tarball, b.base)
}

// goInstall builds static executables with `go install pkg@version`.
func (b *build) goInstall(ctx context.Context, tags string, pkgs ...string) error {
	args := []string{"install", "-trimpath", "-ldflags=-s -w"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	c := engine.Cmd{Name: "go", Args: append(args, pkgs...), Stdout: b.o.Log, Stderr: b.o.Log,
		Env: []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH, "GOBIN=" + b.bin, "GOWORK=off"}}
	return b.o.Runner.Run(ctx, c)
}

func (b *build) runtimeBinaries(ctx context.Context) error {
	v := b.o.Versions
	b.bin = filepath.Join(b.o.CacheDir, fmt.Sprintf("bin-containerd-%s-crictl-%s-coredns-%s-%s", v.Containerd, v.CriTools, v.CoreDNS, runtime.GOARCH))
	if err := os.MkdirAll(b.bin, 0o755); err != nil {
		return err
	}
	containerd := "github.com/containerd/containerd/v2/cmd/"
	if !executables(b.bin, "containerd", "ctr", "containerd-shim-runc-v2") {
		// no btrfs, devmapper or zfs snapshotters: they need cgo.
		if err := b.goInstall(ctx, "no_btrfs no_devmapper no_zfs", containerd+"containerd@"+v.Containerd,
			containerd+"ctr@"+v.Containerd, containerd+"containerd-shim-runc-v2@"+v.Containerd); err != nil {
			return fmt.Errorf("go install containerd %s: %w", v.Containerd, err)
		}
	}
	if !executables(b.bin, "coredns") {
		if err := b.goInstall(ctx, "", "github.com/coredns/coredns@"+v.CoreDNS); err != nil {
			return fmt.Errorf("go install coredns %s: %w", v.CoreDNS, err)
		}
	}
	if !executables(b.bin, "crictl") {
		if err := b.goInstall(ctx, "", "sigs.k8s.io/cri-tools/cmd/crictl@"+v.CriTools); err != nil {
			return fmt.Errorf("go install crictl %s: %w", v.CriTools, err)
		}
	}
	return nil
}

func (b *build) kubeBinaries(ctx context.Context) error {
	opts := controlplane.Options{Versions: controlplane.Versions{Kubernetes: b.o.Versions.Kubernetes}, Progress: b.o.Progress, Log: b.o.Log}
	main, _ := assets.ReadFile("kubenode/main.go.tmpl")
	kubenode, err := controlplane.BuildProgram(ctx, opts, controlplane.Program{Name: "kubenode", Module: "labctl.local/kubenode", Main: main})
	if err != nil {
		return err
	}
	if err := copyExecutable(kubenode, filepath.Join(b.bin, "kubenode")); err != nil {
		return err
	}
	pause, _ := assets.ReadFile("pause/main.go.tmpl")
	return b.goBuildSource(ctx, "pause", pause)
}

// goBuildSource builds a one-file main package of labctl's into bin/name.
func (b *build) goBuildSource(ctx context.Context, name string, main []byte) error {
	if executables(b.bin, name) {
		return nil
	}
	src := filepath.Join(b.work, name)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module labctl.local/"+name+"\n\ngo 1.26\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), main, 0o644); err != nil {
		return err
	}
	c := engine.Cmd{Name: "go", Args: []string{"build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(b.bin, name), "."}, Dir: src,
		Stdout: b.o.Log, Stderr: b.o.Log, Env: []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH, "GOWORK=off"}}
	return b.o.Runner.Run(ctx, c)
}

func (b *build) controlPlane(ctx context.Context) error {
	dir := b.o.ControlPlane
	if dir == "" {
		bins, err := controlplane.Ensure(ctx, controlplane.Options{Progress: b.o.Progress, Log: b.o.Log})
		if err != nil {
			return err
		}
		dir = bins.Dir
	}
	// The components are symlinks to one multi-call binary: copy what
	// they resolve to.
	target, err := filepath.EvalSymlinks(filepath.Join(dir, "kube-apiserver"))
	if err != nil {
		return fmt.Errorf("control-plane binaries in %s: %w", dir, err)
	}
	return copyExecutable(target, filepath.Join(b.bin, "controlplane"))
}

// componentImages builds one image per Component and saves them all into
// one archive for the node's containerd.
func (b *build) componentImages(ctx context.Context) error {
	names, err := b.kubeadmImages(ctx)
	if err != nil {
		return err
	}
	b.images = Components(names)
	for _, c := range b.images {
		dir := filepath.Join(b.work, "image-"+c.Binary+"-"+strings.NewReplacer("/", "_", ":", "_").Replace(c.Name))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := copyExecutable(filepath.Join(b.bin, c.Binary), filepath.Join(dir, c.Binary)); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(c.Dockerfile(b.base)), 0o644); err != nil {
			return err
		}
		b.o.progress("component image %s", c.Name)
		if err := b.o.Engine.Build(ctx, c.Name, filepath.Join(dir, "Dockerfile"), dir, b.o.Log); err != nil {
			return fmt.Errorf("image %s: %w", c.Name, err)
		}
	}
	return nil
}

// kubeadmImages asks the node's own kubeadm which images its static pods
// and add-ons use, as kind's build does (`kubeadm config images list`).
func (b *build) kubeadmImages(ctx context.Context) ([]string, error) {
	out, err := b.output(ctx, filepath.Join(b.bin, "kubenode"), "kubeadm", "config", "images", "list", "--kubernetes-version", b.o.Versions.Kubernetes)
	if err != nil {
		return nil, fmt.Errorf("kubeadm config images list: %w", err)
	}
	return strings.Fields(string(out)), nil
}

func (b *build) nodeImage(ctx context.Context) error {
	dir := filepath.Join(b.work, "node")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	root := filepath.Join(dir, "rootfs")
	kindFiles, err := b.kindBaseFiles(ctx)
	if err != nil {
		return err
	}
	if err := copyTree(kindFiles, root); err != nil {
		return fmt.Errorf("kind's base files: %w", err)
	}
	if err := fsCopy(assets, "files", root); err != nil {
		return err
	}
	if err := b.addCNI(root); err != nil {
		return err
	}
	for dst, src := range map[string]string{
		"usr/local/bin/containerd":              "containerd",
		"usr/local/bin/ctr":                     "ctr",
		"usr/local/bin/containerd-shim-runc-v2": "containerd-shim-runc-v2",
		"usr/local/bin/crictl":                  "crictl",
		"usr/bin/kubenode":                      "kubenode",
	} {
		if err := copyExecutable(filepath.Join(b.bin, src), filepath.Join(root, dst)); err != nil {
			return err
		}
	}
	spec, err := b.criBaseSpec(ctx)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "etc/containerd/cri-base.json"), spec, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "kind/version"), []byte(b.o.Versions.Kubernetes), 0o644); err != nil {
		return err
	}
	df := strings.ReplaceAll(nodeDockerfile, "{{BASE}}", b.base)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	return b.o.Engine.Build(ctx, b.stage(), filepath.Join(dir, "Dockerfile"), dir, b.o.Log)
}

// stage is the node image before its images are preloaded.
func (b *build) stage() string { return b.o.Tag + "-stage" }

// kindBaseFiles is images/base/files of the pinned kind module (its
// entrypoint, systemd units, containerd configuration), from Go's module
// cache or the proxy.
func (b *build) kindBaseFiles(ctx context.Context) (string, error) {
	out, err := b.output(ctx, "go", "mod", "download", "-json", "sigs.k8s.io/kind@"+b.o.Versions.Kind)
	if err != nil {
		return "", fmt.Errorf("go mod download sigs.k8s.io/kind@%s: %w", b.o.Versions.Kind, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download sigs.k8s.io/kind@%s named no directory", b.o.Versions.Kind)
	}
	return filepath.Join(mod.Dir, "images", "base", "files"), nil
}

// criBaseSpec is the OCI spec containerd starts pods from, made as
// kindest/base makes it: ctr's default spec with kind's hook that mounts
// the node's product files, and without rlimits (the runtime's own
// limits apply; raising them would need CAP_SYS_RESOURCE).
func (b *build) criBaseSpec(ctx context.Context) ([]byte, error) {
	out, err := b.output(ctx, filepath.Join(b.bin, "ctr"), "oci", "spec")
	if err != nil {
		return nil, fmt.Errorf("ctr oci spec: %w", err)
	}
	return CRIBaseSpec(out)
}

// CRIBaseSpec edits ctr's default OCI spec as kindest/base does.
func CRIBaseSpec(spec []byte) ([]byte, error) {
	var s map[string]any
	if err := json.Unmarshal(spec, &s); err != nil {
		return nil, fmt.Errorf("ctr oci spec: %w", err)
	}
	hooks, _ := s["hooks"].(map[string]any)
	if hooks == nil {
		hooks = map[string]any{}
	}
	create, _ := hooks["createContainer"].([]any)
	hooks["createContainer"] = append(create, map[string]any{"path": "/kind/bin/mount-product-files.sh"})
	s["hooks"] = hooks
	if p, ok := s["process"].(map[string]any); ok {
		delete(p, "rlimits")
	}
	return json.MarshalIndent(s, "", "    ")
}

// preload imports the component images into the node's containerd
// (without unpacking, as kind's build does: the node's snapshotter is
// chosen when it boots) and commits the node.
func (b *build) preload(ctx context.Context) error {
	e := b.o.Engine
	name := "labctl-nodeimage-" + Key(b.o.Versions)[:8]
	_ = b.run(context.WithoutCancel(ctx), e.Name, "rm", "-f", "-v", name)
	if err := b.run(ctx, e.Name, "run", "-d", "--name", name, "--entrypoint", "sleep", "--security-opt", "seccomp=unconfined", b.stage(), "infinity"); err != nil {
		return fmt.Errorf("start the build container: %w", err)
	}
	defer func() { _ = b.run(context.WithoutCancel(ctx), e.Name, "rm", "-f", "-v", name) }()
	if err := b.run(ctx, e.Name, "exec", "-d", name, "sh", "-c", "containerd >/var/log/containerd-build.log 2>&1"); err != nil {
		return fmt.Errorf("start containerd in the build container: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if err := b.run(ctx, e.Name, "exec", name, "ctr", "version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := b.output(ctx, e.Name, "exec", name, "cat", "/var/log/containerd-build.log")
			return fmt.Errorf("containerd did not start in the build container: %s", engine.LastLine(string(log)))
		}
		time.Sleep(time.Second)
	}
	for _, c := range b.images {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(e.Save(ctx, c.Name, pw)) }()
		imp := engine.Cmd{Name: e.Name, Args: []string{"exec", "-i", name, "ctr", "--namespace=k8s.io", "images", "import",
			"--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack", "--digests", "-"}, Stdin: pr, Stdout: b.o.Log, Stderr: b.o.Log}
		err := b.o.Runner.Run(ctx, imp)
		pr.CloseWithError(err)
		if err != nil {
			return fmt.Errorf("import %s: %w", c.Name, err)
		}
	}
	if err := b.run(ctx, e.Name, "exec", name, "sh", "-c", "pkill containerd; while pgrep -x containerd >/dev/null; do sleep 0.2; done; rm -f /var/log/containerd-build.log"); err != nil {
		return fmt.Errorf("stop containerd in the build container: %w", err)
	}
	if err := b.run(ctx, e.Name, "commit", "--change", `ENTRYPOINT [ "/usr/local/bin/labctl-entrypoint", "/sbin/init" ]`, name, b.o.Tag); err != nil {
		return fmt.Errorf("commit the node image: %w", err)
	}
	// The stage image goes once its container has: the committed node
	// keeps the layers they share.
	if err := b.run(ctx, e.Name, "rm", "-f", "-v", name); err != nil {
		return fmt.Errorf("remove the build container: %w", err)
	}
	// The component images live on in the node; tagged registry.k8s.io/...
	// in the engine they would only shadow the real ones.
	junk := []string{b.stage()}
	for _, c := range b.images {
		junk = append(junk, c.Name)
	}
	return b.run(ctx, e.Name, append([]string{"rmi"}, junk...)...)
}

// addCNI gives containerd the pod network template (see
// node/containerd-cni.toml) next to kind's configuration.
func (b *build) addCNI(root string) error {
	tmpl, _ := assets.ReadFile("node/cni-template.conflist")
	if err := os.WriteFile(filepath.Join(root, "etc/containerd/cni-template.conflist"), tmpl, 0o644); err != nil {
		return err
	}
	snippet, _ := assets.ReadFile("node/containerd-cni.toml")
	f, err := os.OpenFile(filepath.Join(root, "etc/containerd/config.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("kind's containerd configuration: %w", err)
	}
	if _, err := f.Write(snippet); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
