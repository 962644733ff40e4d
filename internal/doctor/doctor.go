// Package doctor probes this machine for the course: one row per
// prerequisite (Go, container engine, kind cluster, kubeconfig, disk,
// ports, control-plane binaries, grading sandbox) with pass, warn or fail
// and the fix. `labctl doctor` is its command.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/diskfree"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/userr"
	"github.com/labctl/labctl/internal/xdg"
)

// Verdict of one probe.
type Verdict int

const (
	Pass Verdict = iota
	Skip
	Warn
	Fail
)

func (v Verdict) String() string { return [...]string{"pass", "skip", "warn", "fail"}[v] }

// MarshalText writes the verdict as its word, so `doctor -o json` reads
// "fail", not 3.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// Probe is one row of the report.
type Probe struct {
	Name   string  `json:"name"`
	Status Verdict `json:"status"`
	Detail string  `json:"detail,omitempty"`
	Fix    string  `json:"fix,omitempty"`
}

// MinGo is the Go version student projects need (kubebuilder v4.7 scaffolds
// go 1.24).
const MinGo = "1.24"

// MinFreeBytes: below this the local control-plane build (about 6 GB of
// build cache and binaries) may not fit.
const MinFreeBytes = 8 << 30

// Options say what to probe and carry the probes' dependencies, which
// tests replace.
type Options struct {
	// Name is the course cluster to look for.
	Name string
	// Kind is the kind provider, for its cluster's status (nil: this build
	// has none, and the row is skipped).
	Kind cluster.Provider

	// Engine is --engine ("" = KIND_EXPERIMENTAL_PROVIDER, else either).
	Engine string
	// Runner runs go/docker/podman (default engine.OSRunner).
	Runner engine.Runner
	Getenv func(string) string
	// Kubeconfig is read instead of $KUBECONFIG / ~/.kube/config.
	Kubeconfig string
	// CacheDir is labctl's cache (default $XDG_CACHE_HOME/labctl).
	CacheDir string
	// FreeBytes reports the free space of the file system holding path.
	FreeBytes func(path string) (uint64, error)
	// PortInUse reports whether a host TCP port is taken.
	PortInUse func(port int) bool
	// Sandbox says whether submissions can be sandboxed for grading
	// (default sandbox.Probe).
	Sandbox func() sandbox.Support
	// UnprivilegedPortStart is the lowest port a rootless engine may
	// publish (default kind.UnprivilegedPortStart).
	UnprivilegedPortStart func() int
}

// Failed reports whether any probe failed (warnings are fine).
func Failed(probes []Probe) bool {
	for _, p := range probes {
		if p.Status == Fail {
			return true
		}
	}
	return false
}

// Print writes the report: an aligned table on a terminal with a verdict
// line, tab-separated rows with plain status words when piped.
func Print(s *iostreams.IOStreams, probes []Probe) {
	st := s.Styles()
	t := s.NewTable("CHECK", "STATUS", "DETAIL", "FIX")
	fails, warns := 0, 0
	for _, c := range probes {
		status := c.Status.String()
		switch c.Status {
		case Pass:
			status = st.Success.Render("✓ pass")
		case Skip:
			status = st.Muted.Render("- skip")
		case Warn:
			status = st.Warning.Render("! warn")
			warns++
		case Fail:
			status = st.Failure.Render("✗ fail")
			fails++
		}
		if !s.IsTTY() {
			status = c.Status.String() // plain words for scripts
		}
		fix := c.Fix
		if c.Status == Pass || fix == "" {
			fix = "-"
		}
		t.Row(c.Name, status, c.Detail, fix)
	}
	_ = t.Print()
	if s.IsTTY() {
		switch {
		case fails > 0:
			fmt.Fprintf(s.Out, "\n%s\n", st.Failure.Render(fmt.Sprintf("%d failed, %d warnings: fix the failures above", fails, warns)))
		case warns > 0:
			fmt.Fprintf(s.Out, "\n%s\n", st.Warning.Render(fmt.Sprintf("ready, with %d warnings", warns)))
		default:
			fmt.Fprintf(s.Out, "\n%s\n", st.Success.Render("ready for the course"))
		}
	}
}

// Run runs every probe, in the order of the report.
func Run(ctx context.Context, o *Options) []Probe {
	if o.Runner == nil {
		o.Runner = engine.OSRunner{}
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.FreeBytes == nil {
		o.FreeBytes = freeBytes
	}
	if o.PortInUse == nil {
		o.PortInUse = kind.PortInUse
	}
	if o.Name == "" {
		o.Name = cluster.DefaultName
	}
	var out []Probe
	out = append(out, checkGo(ctx, o))
	eng, engCheck := checkEngine(ctx, o)
	out = append(out, engCheck)
	out = append(out, checkEngineHost(ctx, o, eng)...)
	kindCheck, kindRunning := checkKind(ctx, o, eng)
	out = append(out, kindCheck)
	out = append(out, checkKubeconfig(ctx, o))
	out = append(out, checkDisk(o))
	out = append(out, checkPorts(o, kindRunning)...)
	out = append(out, checkBinaries(o))
	out = append(out, checkSandbox(o))
	return out
}

// checkSandbox: can `labctl grade` run students' code confined? Only
// instructors need it, so its absence is a warning.
func checkSandbox(o *Options) Probe {
	probe := o.Sandbox
	if probe == nil {
		probe = sandbox.Probe
	}
	c := Probe{Name: "Grading sandbox"}
	sup := probe()
	if !sup.OK {
		c.Status, c.Detail = Warn, sup.Reason
		c.Fix = "only `labctl grade` needs it: run it as root on Linux with mount and pid namespaces; elsewhere it refuses unless --unsafe-no-sandbox"
		return c
	}
	c.Status, c.Detail = Pass, "submissions run as their own uid in mount and pid namespaces (kernel, no external tool)"
	if !sup.Overlay {
		c.Detail += "; no overlayfs: each build compiles its dependencies anew"
	}
	if sup.Cgroups.Version == 0 {
		// Grading works; a runaway submission is then bounded only by its
		// manager's limits and the wall time.
		c.Status = Warn
		c.Detail += "; each box has per-process limits only: " + sup.Cgroups.Reason
		c.Fix = "run `labctl grade` as root with /sys/fs/cgroup writable, so each submission's box (cluster, build, manager) is limited as a whole"
	} else {
		c.Detail += "; each box limited as a whole through " + sup.Cgroups.String()
	}
	return c
}

var goVersionRe = regexp.MustCompile(`go(\d+)\.(\d+)(?:\.(\d+))?`)

func checkGo(ctx context.Context, o *Options) Probe {
	c := Probe{Name: "Go", Fix: "install Go " + MinGo + " or newer from https://go.dev/dl and put it on PATH"}
	if _, err := o.Runner.LookPath("go"); err != nil {
		c.Status, c.Detail = Fail, "go is not on PATH"
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := engine.Output(ctx, o.Runner, "go", "version")
	if err != nil {
		c.Status, c.Detail = Fail, "`go version` failed: "+userr.Message(err)
		return c
	}
	m := goVersionRe.FindStringSubmatch(string(out))
	if m == nil {
		c.Status, c.Detail = Warn, "cannot read the version from: "+strings.TrimSpace(string(out))
		return c
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	wantMinor, _ := strconv.Atoi(strings.TrimPrefix(MinGo, "1."))
	c.Detail = strings.TrimPrefix(m[0], "go")
	if major > 1 || (major == 1 && minor >= wantMinor) {
		c.Status = Pass
		return c
	}
	c.Status = Fail
	c.Detail += " (student projects need " + MinGo + "+)"
	return c
}

func checkEngine(ctx context.Context, o *Options) (*engine.Engine, Probe) {
	c := Probe{Name: "Container engine"}
	explicit := o.Engine
	source := "--engine"
	if explicit == "" {
		explicit = strings.TrimSpace(o.Getenv(engine.EnvProvider))
		source = engine.EnvProvider
	}
	if explicit != "" {
		e, err := engine.Detect(ctx, o.Runner, engine.Options{Explicit: explicit, Getenv: o.Getenv})
		if err != nil {
			var ue *userr.Error
			c.Status, c.Detail = Fail, userr.Message(err)
			if errors.As(err, &ue) {
				c.Detail, c.Fix = ue.What, ue.Next
			}
			c.Detail += " (chosen by " + source + ")"
			return nil, c
		}
		c.Status, c.Detail = Pass, fmt.Sprintf("%s %s (chosen by %s)", e.Name, e.Version, source)
		return e, c
	}
	var probes []engine.Probe
	var found *engine.Engine
	for _, n := range engine.Names {
		p := engine.ProbeEngine(ctx, o.Runner, n)
		probes = append(probes, p)
		if found == nil && p.Usable() {
			found = engine.New(n, o.Runner)
			found.Version = p.Version
		}
	}
	var notes []string
	for _, p := range probes {
		switch {
		case p.Usable():
			notes = append(notes, fmt.Sprintf("%s %s running", p.Name, p.Version))
		case p.Installed:
			notes = append(notes, fmt.Sprintf("%s installed but not running: %s", p.Name, reason(p.Err)))
		default:
			notes = append(notes, p.Name+" not installed")
		}
	}
	c.Detail = strings.Join(notes, "; ")
	switch {
	case found != nil:
		c.Status = Pass
		c.Detail = "using " + found.Name + " — " + c.Detail
	case probes[0].Installed || probes[1].Installed:
		c.Status = Warn
		name := probes[0].Name
		if !probes[0].Installed {
			name = probes[1].Name
		}
		c.Fix = "start " + name + " for kind clusters (`sudo systemctl start docker`, Docker Desktop or `podman machine start`); until then labctl uses the local provider"
	default:
		c.Status = Warn
		c.Fix = "optional: install Docker or Podman for kind clusters; labctl uses the local provider without them"
	}
	return found, c
}

func reason(err error) string {
	var ee *engine.ExitError
	if errors.As(err, &ee) {
		if l := engine.LastLine(ee.Stderr); l != "" {
			return l
		}
	}
	return userr.Message(err)
}

func checkKind(ctx context.Context, o *Options, e *engine.Engine) (Probe, bool) {
	c := Probe{Name: "kind cluster"}
	if e == nil {
		c.Status, c.Detail = Skip, "no container engine running"
		return c, false
	}
	if o.Kind == nil {
		c.Status, c.Detail = Skip, "kind provider not available in this build"
		return c, false
	}
	st, err := o.Kind.Status(ctx, o.Name)
	switch {
	case errors.Is(err, cluster.ErrNotFound):
		c.Status, c.Detail = Warn, fmt.Sprintf("no kind cluster %q yet", o.Name)
		c.Fix = "run `labctl up` to create it"
		return c, false
	case err != nil:
		c.Status, c.Detail = Fail, userr.Message(err)
		c.Fix = fmt.Sprintf("check `%s ps -a`; `labctl reset --cluster` recreates it", e.Name)
		return c, false
	case !st.Running:
		var bad []string
		for _, comp := range st.Components {
			if !comp.Healthy {
				bad = append(bad, comp.Name+": "+comp.Detail)
			}
		}
		c.Status, c.Detail = Fail, fmt.Sprintf("%q is not healthy (%s)", o.Name, strings.Join(bad, "; "))
		c.Fix = fmt.Sprintf("run `labctl up --provider kind --name %s` to start it, or `labctl reset --cluster`", o.Name)
		return c, true
	}
	c.Status, c.Detail = Pass, fmt.Sprintf("%q running (context %s)", o.Name, st.Context)
	return c, true
}

func checkKubeconfig(ctx context.Context, o *Options) Probe {
	c := Probe{Name: "kubeconfig context"}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	raw, err := rules.Load()
	if err != nil {
		c.Status, c.Detail = Fail, "cannot read the kubeconfig: "+userr.Message(err)
		c.Fix = "fix or move the file, or set KUBECONFIG to another one"
		return c
	}
	if raw.CurrentContext == "" {
		c.Status, c.Detail = Warn, "no current context"
		c.Fix = "run `labctl up` (it adds and selects the course's context)"
		return c
	}
	name := raw.CurrentContext
	ours := name == kind.ContextName(o.Name) || strings.HasPrefix(name, "labctl-")
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
	if err != nil {
		c.Status, c.Detail = Fail, fmt.Sprintf("context %q is unusable: %s", name, userr.Message(err))
		c.Fix = "fix it (`kubectl config view`) or run `labctl up`"
		return c
	}
	v, err := kube.ServerVersion(ctx, cfg, 5*time.Second)
	if err == nil {
		c.Status, c.Detail = Pass, fmt.Sprintf("%s reachable (Kubernetes %s)", name, v)
		return c
	}
	c.Detail = fmt.Sprintf("%s does not answer: %s", name, userr.Message(err))
	c.Status, c.Fix = Warn, "start that cluster or switch context (`kubectl config use-context`); `labctl up` creates the course's"
	if ours {
		c.Status, c.Fix = Fail, "run `labctl up` to start the course's cluster again"
	}
	return c
}

func cacheDir(o *Options) string {
	if o.CacheDir != "" {
		return o.CacheDir
	}
	if d, err := xdg.CacheDir(); err == nil {
		return d
	}
	return os.TempDir()
}

func checkDisk(o *Options) Probe {
	dir := cacheDir(o)
	c := Probe{Name: "Disk space", Fix: "free space there (`go clean -cache` frees Go's build cache), or set XDG_CACHE_HOME to a roomier disk"}
	// The cache may not exist yet: measure the nearest existing parent.
	probe := dir
	for {
		if _, err := os.Stat(probe); err == nil || filepath.Dir(probe) == probe {
			break
		}
		probe = filepath.Dir(probe)
	}
	free, err := o.FreeBytes(probe)
	if err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("cannot measure free space in %s: %v", probe, err)
		return c
	}
	c.Detail = fmt.Sprintf("%.1f GB free in %s", float64(free)/(1<<30), dir)
	switch {
	case free < 1<<30:
		c.Status = Fail
	case free < MinFreeBytes:
		c.Status = Warn
		c.Detail += " (the local control-plane build needs about 6 GB)"
	default:
		c.Status = Pass
	}
	return c
}

func freeBytes(path string) (uint64, error) { return diskfree.Available(path) }

func checkPorts(o *Options, kindRunning bool) []Probe {
	var out []Probe
	for _, port := range []int{80, 443} {
		c := Probe{Name: fmt.Sprintf("Port %d", port)}
		switch {
		case !o.PortInUse(port):
			c.Status, c.Detail = Pass, "free for the course's ingress mapping"
		case kindRunning:
			c.Status, c.Detail = Pass, "in use (by the kind cluster's ingress mapping)"
		default:
			c.Status, c.Detail = Warn, "in use by another program: a new kind cluster gets no ingress port mapping"
			c.Fix = fmt.Sprintf("stop the program listening on it (`sudo ss -ltnp 'sport = :%d'` shows which)", port)
		}
		out = append(out, c)
	}
	return out
}

func checkBinaries(o *Options) Probe {
	c := Probe{Name: "Control-plane binaries"}
	if assets := o.Getenv("KUBEBUILDER_ASSETS"); assets != "" && len(controlplane.Missing(assets)) == 0 {
		c.Status, c.Detail = Pass, "KUBEBUILDER_ASSETS="+assets
		return c
	}
	bin := filepath.Join(controlplane.CacheDirIn(cacheDir(o)), controlplane.DefaultVersions().Key(), "bin")
	missing := controlplane.Missing(bin)
	if len(missing) == 0 {
		c.Status, c.Detail = Pass, "cached in "+bin
		return c
	}
	c.Status = Warn
	c.Detail = "not downloaded or built yet (only the local provider needs them)"
	if len(missing) < len(controlplane.Components) {
		c.Detail = "incomplete in " + bin + ": missing " + strings.Join(missing, ", ")
	}
	c.Fix = "`labctl controlplane build` downloads them once (seconds online), or offline builds them (15-20 minutes on 2 cores, about 6 GB)"
	return c
}
