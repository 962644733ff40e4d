package controlplane

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/mod/modfile"

	"github.com/labctl/labctl/internal/fslock"
	"github.com/labctl/labctl/internal/userr"
)

//go:embed multicall/main.go.tmpl
var multicallMain []byte

// binaryName is the multi-call executable; components are symlinks to it.
const binaryName = "controlplane"

// Options say where to find or put the binaries.
type Options struct {
	Versions Versions
	// BinDir, when set, must already hold every component (--bin-dir).
	BinDir string
	// CacheDir defaults to DefaultCacheDir().
	CacheDir string
	// Go is the go command; default "go" from PATH.
	Go string
	// Progress receives short human-readable updates while building.
	Progress func(format string, args ...any)
	// Log receives the go command's output (may be nil).
	Log io.Writer
	// FromSource skips the download and builds from the Go module proxy
	// (--from-source: offline machines, or to not trust a release site).
	FromSource bool
	// Mirror is the root of a copy of the release sites (--mirror); empty:
	// $LABCTL_CONTROLPLANE_MIRROR, else the sites themselves.
	Mirror string
	// Notice receives the one line saying why labctl builds after all
	// (the download was impossible); nil: Progress gets it.
	Notice func(line string)

	// For tests: checksums instead of pinnedSHA256, a shorter stall bound,
	// and the platform whose release binaries are fetched.
	pins        map[string]string
	idleTimeout time.Duration
	goos, arch  string
}

// Installed returns a complete set of binaries that is already here
// (KUBEBUILDER_ASSETS, then the cache of the default versions), or nil:
// it neither downloads nor builds.
func Installed() *Binaries {
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" && len(Missing(assets)) == 0 {
		return &Binaries{Dir: assets, Source: "KUBEBUILDER_ASSETS"}
	}
	dir, err := DefaultCacheDir()
	if err != nil {
		return nil
	}
	bin := filepath.Join(dir, DefaultVersions().Key(), "bin")
	if len(Missing(bin)) > 0 {
		return nil
	}
	return &Binaries{Dir: bin, Source: "cache"}
}

// Ensure returns a complete set of binaries: --bin-dir, then
// KUBEBUILDER_ASSETS when it holds every component, then the cache, else it
// downloads the official release binaries, checksum-verified (seconds),
// else builds them (minutes on a cold machine; seconds to relink when Go's
// build cache is warm).
func Ensure(ctx context.Context, opts Options) (*Binaries, error) {
	if opts.BinDir != "" {
		if missing := Missing(opts.BinDir); len(missing) > 0 {
			return nil, userr.Usage(fmt.Sprintf("--bin-dir %s lacks %s", opts.BinDir, strings.Join(missing, ", ")),
				"point it at a directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, or drop the flag to build them")
		}
		return &Binaries{Dir: opts.BinDir, Source: "--bin-dir"}, nil
	}
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" && len(Missing(assets)) == 0 {
		return &Binaries{Dir: assets, Source: "KUBEBUILDER_ASSETS"}, nil
	}
	if opts.Versions == (Versions{}) {
		opts.Versions = DefaultVersions()
	}
	if opts.CacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil {
			return nil, userr.Wrap(err, userr.ExitEnvironment, "no cache directory for the control-plane binaries", "set XDG_CACHE_HOME or pass --bin-dir")
		}
		opts.CacheDir = dir
	}
	root := filepath.Join(opts.CacheDir, opts.Versions.Key())
	bin := filepath.Join(root, "bin")
	if len(Missing(bin)) == 0 {
		return &Binaries{Dir: bin, Source: "cache"}, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, classify(err, "cannot create the cache directory "+root)
	}
	// Several labctl processes (parallel test packages, two terminals) may
	// want the binaries at once: one downloads or builds, the others wait.
	unlock, err := lockFile(ctx, filepath.Join(root, ".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if len(Missing(bin)) == 0 {
		return &Binaries{Dir: bin, Source: "cache"}, nil
	}
	if !opts.FromSource {
		err := download(ctx, opts, root)
		if err == nil {
			return &Binaries{Dir: bin, Source: "downloaded"}, nil
		}
		var failed *downloadFailed
		if !errors.As(err, &failed) {
			return nil, err
		}
		line := failed.reason + ": building from the Go module proxy instead, 12-20 min"
		if opts.Notice != nil {
			opts.Notice(line)
		} else if opts.Progress != nil {
			opts.Progress("%s", line)
		}
	}
	b := &builder{opts: opts, root: root}
	if err := b.build(ctx); err != nil {
		return nil, err
	}
	return &Binaries{Dir: bin, Source: "built"}, nil
}

type builder struct {
	opts Options
	root string
}

func (b *builder) progress(format string, args ...any) {
	if b.opts.Progress != nil {
		b.opts.Progress(format, args...)
	}
}

func (b *builder) goCmd() (string, error) {
	name := b.opts.Go
	if name == "" {
		name = "go"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", userr.Env("the Go toolchain is needed to build the local control plane, and "+name+" was not found",
			"install Go 1.26 or newer (https://go.dev/doc/install), or pass --bin-dir with prebuilt binaries")
	}
	return path, nil
}

func (b *builder) build(ctx context.Context) error {
	goBin, err := b.goCmd()
	if err != nil {
		return err
	}
	v := b.opts.Versions
	src := filepath.Join(b.root, "src")
	requires := [][2]string{{"k8s.io/kubernetes", v.Kubernetes}, {"go.etcd.io/etcd/server/v3", v.Etcd}, {"sigs.k8s.io/kwok", v.Kwok}}
	if err := b.prepare(ctx, goBin, src, "labctl.local/controlplane", requires, multicallMain); err != nil {
		return err
	}
	tmp := filepath.Join(b.root, binaryName+".tmp")
	b.progress("compiling (a cold build takes 12-20 minutes on 2 cores; later builds reuse Go's cache)")
	if err := b.compile(ctx, goBin, src, tmp); err != nil {
		return err
	}
	return b.install(tmp)
}

// prepare writes a generated module into src: go.mod requiring
// k8s.io/kubernetes (and whatever else requires names) with every staging
// module pinned, main.go, and go.sum from `go mod tidy`.
func (b *builder) prepare(ctx context.Context, goBin, src, module string, requires [][2]string, main []byte) error {
	if err := os.MkdirAll(src, 0o755); err != nil {
		return classify(err, "cannot write the build module")
	}
	v := b.opts.Versions

	b.progress("resolving k8s.io/kubernetes %s", v.Kubernetes)
	out, err := b.run(ctx, goBin, src, "mod", "download", "-json", "k8s.io/kubernetes@"+v.Kubernetes)
	if err != nil {
		return proxyError(err, out)
	}
	var info struct{ GoMod string }
	if err := json.Unmarshal(out, &info); err != nil || info.GoMod == "" {
		return userr.New("go mod download returned no go.mod for k8s.io/kubernetes "+v.Kubernetes, "run `go mod download k8s.io/kubernetes@"+v.Kubernetes+"` to see why")
	}
	k8sMod, err := os.ReadFile(info.GoMod)
	if err != nil {
		return classify(err, "cannot read k8s.io/kubernetes's go.mod")
	}
	gomod, err := generateGoMod(k8sMod, module, requires, v)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), gomod, 0o644); err != nil {
		return classify(err, "cannot write the build module")
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), main, 0o644); err != nil {
		return classify(err, "cannot write the build module")
	}

	b.progress("downloading modules")
	if out, err := b.run(ctx, goBin, src, "mod", "tidy"); err != nil {
		return proxyError(err, out)
	}
	return nil
}

// compile builds the generated module in src into out, reporting each
// package as `go build -v` names it.
func (b *builder) compile(ctx context.Context, goBin, src, out string) error {
	v := b.opts.Versions
	total := b.countPackages(ctx, goBin, src)
	cmd := exec.CommandContext(ctx, goBin, "build", "-v", "-trimpath", "-ldflags", Ldflags(v), "-o", out, ".")
	cmd.Dir = src
	cmd.Env = buildEnv()
	logTail := &tailBuffer{max: 40}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = logTail
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return classify(err, "cannot start go build")
	}
	compiled := 0
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		logTail.WriteString(line + "\n")
		if b.opts.Log != nil {
			fmt.Fprintln(b.opts.Log, line)
		}
		// go build -v prints each package as it is compiled.
		if !strings.Contains(line, " ") && !strings.HasPrefix(line, "#") {
			compiled++
			if total > 0 {
				b.progress("compiling %d/%d packages (%s)", min(compiled, total), total, time.Since(started).Round(time.Second))
			} else {
				b.progress("compiling %d packages (%s)", compiled, time.Since(started).Round(time.Second))
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		_ = os.Remove(out)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return buildError(err, logTail.String())
	}
	return nil
}

// install moves the fresh binary into bin/ with one symlink per component.
func (b *builder) install(tmp string) error {
	bin := filepath.Join(b.root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return classify(err, "cannot create "+bin)
	}
	if err := os.Rename(tmp, filepath.Join(bin, binaryName)); err != nil {
		return classify(err, "cannot install the control-plane binary")
	}
	for _, c := range Components {
		link := filepath.Join(bin, c)
		_ = os.Remove(link)
		if err := os.Symlink(binaryName, link); err != nil {
			return classify(err, "cannot link "+c)
		}
	}
	return nil
}

func (b *builder) countPackages(ctx context.Context, goBin, dir string) int {
	out, err := b.run(ctx, goBin, dir, "list", "-deps", ".")
	if err != nil {
		return 0
	}
	return bytes.Count(out, []byte("\n"))
}

func (b *builder) run(ctx context.Context, goBin, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = buildEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if b.opts.Log != nil {
		fmt.Fprintf(b.opts.Log, "$ go %s\n%s", strings.Join(args, " "), stderr.String())
	}
	if err != nil {
		return stderr.Bytes(), err
	}
	return stdout.Bytes(), nil
}

func buildEnv() []string {
	// The generated module must not be swallowed by a go.work of the user's.
	return append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
}

// Ldflags stamps the version so /version parses (kubectl and client-go
// discovery reject "v0.0.0-master+$Format:%H$").
func Ldflags(v Versions) string {
	major, minor := "1", ""
	if parts := strings.SplitN(strings.TrimPrefix(v.Kubernetes, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	p := "k8s.io/component-base/version."
	return strings.Join([]string{
		"-s", "-w",
		"-X", p + "gitMajor=" + major,
		"-X", p + "gitMinor=" + minor,
		"-X", p + "gitVersion=" + v.Kubernetes,
		"-X", p + "gitTreeState=clean",
		"-X", p + "buildDate=2026-01-01T00:00:00Z",
	}, " ")
}

// GenerateGoMod writes the wrapper module: the three components required,
// and every k8s.io staging module that k8s.io/kubernetes replaces with a
// local path pinned to its published v0.x version instead.
func GenerateGoMod(kubernetesGoMod []byte, v Versions) ([]byte, error) {
	return generateGoMod(kubernetesGoMod, "labctl.local/controlplane",
		[][2]string{{"k8s.io/kubernetes", v.Kubernetes}, {"go.etcd.io/etcd/server/v3", v.Etcd}, {"sigs.k8s.io/kwok", v.Kwok}}, v)
}

func generateGoMod(kubernetesGoMod []byte, module string, requires [][2]string, v Versions) ([]byte, error) {
	k8s, err := modfile.Parse("k8s.io/kubernetes/go.mod", kubernetesGoMod, nil)
	if err != nil {
		return nil, fmt.Errorf("parse k8s.io/kubernetes go.mod: %w", err)
	}
	staging := "v0." + strings.SplitN(strings.TrimPrefix(v.Kubernetes, "v1."), "-", 2)[0]
	f := &modfile.File{}
	if err := f.AddModuleStmt(module); err != nil {
		return nil, err
	}
	if err := f.AddGoStmt("1.26"); err != nil {
		return nil, err
	}
	for _, r := range requires {
		if err := f.AddRequire(r[0], r[1]); err != nil {
			return nil, err
		}
	}
	n := 0
	for _, r := range k8s.Replace {
		if strings.HasPrefix(r.New.Path, "./staging/") {
			if err := f.AddReplace(r.Old.Path, "", r.Old.Path, staging); err != nil {
				return nil, err
			}
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("k8s.io/kubernetes %s go.mod lists no staging modules; this version cannot be built as a module", v.Kubernetes)
	}
	f.Cleanup()
	return f.Format()
}

func lockFile(ctx context.Context, path string) (func(), error) {
	unlock, err := fslock.Lock(ctx, path)
	if err != nil && ctx.Err() == nil {
		return nil, classify(err, "cannot lock the cache")
	}
	return unlock, err
}

// classify turns an OS error into a user-facing one, recognising a full disk.
func classify(err error, what string) error {
	if errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left on device") {
		return userr.Wrap(err, userr.ExitEnvironment, what+": the disk is full",
			"free some space (the build needs about 6 GB for Go's caches) and run the command again")
	}
	return userr.Wrap(err, userr.ExitFailure, what+": "+err.Error(), "check permissions on the cache directory or set XDG_CACHE_HOME")
}

func buildError(err error, log string) error {
	if strings.Contains(log, "no space left on device") {
		return classify(syscall.ENOSPC, "building the control plane failed")
	}
	return userr.Wrap(err, userr.ExitFailure, "building the control plane failed: "+lastLines(log, 3),
		"run again with -v for the whole log; if Go's cache is corrupt, `go clean -cache` helps")
}

func proxyError(err error, stderr []byte) error {
	msg := string(stderr)
	if strings.Contains(msg, "no space left on device") {
		return classify(syscall.ENOSPC, "downloading modules failed")
	}
	return userr.Wrap(err, userr.ExitEnvironment, "the Go module proxy did not provide the control-plane modules: "+lastLines(msg, 2),
		"check network access to your GOPROXY ("+goproxy()+"), or pass --bin-dir with prebuilt binaries")
}

func goproxy() string {
	if p := os.Getenv("GOPROXY"); p != "" {
		return p
	}
	return "the default proxy"
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// tailBuffer keeps the last max lines written to it.
type tailBuffer struct {
	max   int
	lines []string
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		t.WriteString(l + "\n")
	}
	return len(p), nil
}

func (t *tailBuffer) WriteString(s string) {
	t.lines = append(t.lines, strings.TrimRight(s, "\n"))
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *tailBuffer) String() string { return strings.Join(t.lines, "\n") }
