package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/supervise"
	"github.com/labctl/labctl/internal/userr"
)

// LocalOptions tune RunLocal.
type LocalOptions struct {
	Streams *iostreams.IOStreams
	// Go is the go command (default "go").
	Go string
	// TiedToParent makes the manager die with this process (tests).
	TiedToParent bool
	// ReadyTimeout bounds the wait for the manager's /readyz (default 90s).
	ReadyTimeout time.Duration
	// Limits bound the manager's CPU time and memory (grading).
	Limits supervise.Limits
}

// localRecord is what the state dir remembers about a running operator.
type localRecord struct {
	Name           string `json:"name"`
	ProjectDir     string `json:"projectDir"`
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
	ProbePort      int    `json:"probePort"`
	// SourceHash fingerprints the sources the running manager was built
	// from (sourceHash).
	SourceHash string `json:"sourceHash,omitempty"`
}

// operatorsDir holds one directory per operator run on a local cluster.
func operatorsDir(c *cluster.Cluster) string { return filepath.Join(c.Env.StateDir, "operators") }

// RunLocal deploys p onto a local cluster the way `make install run` does,
// with the project's own RBAC enforced: CRDs and everything else in
// config/default are applied except the manager Deployment (and webhook
// configurations, which no local Service could serve); the manager is built
// with `go build` and run as a supervised process whose kubeconfig
// impersonates the manager's ServiceAccount. A manager already running for
// the same project name is replaced.
func RunLocal(ctx context.Context, c *cluster.Cluster, p *Project, opts LocalOptions) (*Operator, error) {
	if c.Env.StateDir == "" {
		return nil, userr.New("running an operator as a local process needs a local cluster", "use `labctl up --provider local`, or deploy in-cluster on kind")
	}
	s := opts.Streams
	if s == nil {
		s, _, _ = iostreams.Test(false)
	}
	objs, err := p.Render()
	if err != nil {
		return nil, err
	}
	rec := localRecord{Name: p.Name, ProjectDir: p.Dir}
	var keep []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			if rec.Namespace == "" {
				rec.Namespace = o.GetNamespace()
				rec.ServiceAccount, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			}
			continue
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			fmt.Fprintf(s.ErrOut, "Skipping %s %s: webhooks are not served on the local provider.\n", o.GetKind(), o.GetName())
			continue
		}
		keep = append(keep, o)
	}
	if rec.Namespace == "" {
		return nil, userr.Usage(p.Dir+"/config/default renders no manager Deployment", "check config/default/kustomization.yaml includes ../manager, as kubebuilder scaffolds it")
	}
	if rec.ServiceAccount == "" {
		rec.ServiceAccount = "default"
	}

	step := s.StartStep("Installing CRDs and RBAC from config/default")
	applier, err := NewApplier(c.Config)
	if err != nil {
		step.Fail()
		return nil, err
	}
	skipped, err := applier.Apply(ctx, keep)
	if err != nil {
		step.Fail()
		return nil, userr.Wrap(err, userr.ExitFailure, "cannot install the project's manifests: "+err.Error(), "run `make manifests` in the project and check config/")
	}
	step.Done(fmt.Sprintf("%d objects", len(keep)-len(skipped)))
	for _, sk := range skipped {
		fmt.Fprintf(s.ErrOut, "Skipped %s %s: %s.\n", sk.Object.GetKind(), sk.Object.GetName(), sk.Reason)
	}

	dir := filepath.Join(operatorsDir(c), p.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	step = s.StartStep("Building the manager (go build)")
	bin, reused, err := BuildManager(ctx, p, opts.Go)
	if err != nil {
		step.Fail()
		return nil, err
	}
	rec.SourceHash, _ = sourceHash(p.Dir)
	if reused {
		step.Done("unchanged sources, reused")
	} else {
		step.Done()
	}

	// Replace a manager already running for this project.
	if err := stopOperator(ctx, dir); err != nil {
		return nil, err
	}
	identity := ServiceAccountUser(rec.Namespace, rec.ServiceAccount)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeImpersonatingKubeconfig(c.Kubeconfig, kubeconfig, rec.Namespace, identity); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	rec.ProbePort = port
	logFile, restartsFile := filepath.Join(dir, "manager.log"), filepath.Join(dir, "restarts")
	_ = os.Remove(logFile)
	_ = os.Remove(restartsFile)
	path, args, env, err := supervise.CommandLimited(logFile, restartsFile, opts.Limits, []string{bin,
		"--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=0",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", port),
		"--leader-elect=false",
	})
	if err != nil {
		return nil, err
	}
	step = s.StartStep(fmt.Sprintf("Starting the manager as %s", identity))
	_, err = proc.Start(proc.Spec{
		Name:         "manager supervisor",
		Path:         path,
		Args:         args,
		Env:          append(env, "KUBECONFIG="+kubeconfig, "ENABLE_WEBHOOKS=false"),
		Dir:          p.Dir,
		LogFile:      filepath.Join(dir, "supervisor.log"),
		TiedToParent: opts.TiedToParent,
	})
	if err != nil {
		step.Fail()
		return nil, err
	}
	raw, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "operator.json"), raw, 0o644); err != nil {
		step.Fail()
		return nil, err
	}
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	if err := waitManagerReady(ctx, port, restartsFile, timeout); err != nil {
		step.Fail()
		tail := proc.Tail(logFile, 6)
		for _, l := range tail {
			fmt.Fprintln(s.ErrOut, s.Styles().Muted.Render("  "+l))
		}
		last := "no output"
		for _, l := range tail {
			if !strings.HasPrefix(l, "==== labctl supervisor") {
				last = l // the manager's own last words, not the supervisor's note
			}
		}
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("the manager did not become ready: %v; its log ends: %s", err, truncate(last, 200)),
			"see "+logFile+"; fix the operator and run `labctl up` again")
	}
	step.Done()
	return operatorFor(p, rec, dir), nil
}

func operatorFor(p *Project, rec localRecord, dir string) *Operator {
	return &Operator{
		Project:        p,
		Namespace:      rec.Namespace,
		ServiceAccount: rec.ServiceAccount,
		Identity:       ServiceAccountUser(rec.Namespace, rec.ServiceAccount),
		SourceHash:     rec.SourceHash,
		Logs: func(context.Context) ([]byte, error) {
			return os.ReadFile(filepath.Join(dir, "manager.log"))
		},
		Restarts: func(context.Context) (int, error) {
			return supervise.Restarts(filepath.Join(dir, "restarts"))
		},
	}
}

// CurrentLocal returns the operator running on a local cluster, or an
// error saying how to deploy one.
func CurrentLocal(c *cluster.Cluster) (*Operator, error) {
	entries, err := os.ReadDir(operatorsDir(c))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		dir := filepath.Join(operatorsDir(c), e.Name())
		raw, err := os.ReadFile(filepath.Join(dir, "operator.json"))
		if err != nil {
			continue
		}
		var rec localRecord
		if json.Unmarshal(raw, &rec) != nil {
			continue
		}
		if procs, _ := proc.Find(dir); len(procs) == 0 {
			continue
		}
		return operatorFor(&Project{Dir: rec.ProjectDir, Name: rec.Name}, rec, dir), nil
	}
	return nil, userr.New(fmt.Sprintf("no operator is running on cluster %q", c.Name), "run `labctl up` (or `labctl up --project DIR`) first")
}

// StopLocal stops every operator labctl runs on a local cluster.
func StopLocal(ctx context.Context, c *cluster.Cluster) error {
	return stopOperator(ctx, operatorsDir(c))
}

func stopOperator(ctx context.Context, dir string) error {
	// Supervisors restart managers: repeat until nothing is left.
	for pass := 0; pass < 5; pass++ {
		procs, err := proc.Find(dir)
		if err != nil || len(procs) == 0 {
			return err
		}
		for _, pr := range procs {
			if err := proc.Stop(ctx, pr.PID, 10*time.Second); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("operator processes under %s keep coming back", dir)
}

// BuildManager returns the project's manager executable, built with
// `go build` into the user's cache under a fingerprint of its sources, so a
// new cluster or a redeploy of unchanged code skips even the link step.
// Callers may build first (grading does) so a project that does not
// compile costs no cluster; RunLocal then finds the binary cached.
func BuildManager(ctx context.Context, p *Project, goCmd string) (path string, reused bool, err error) {
	sum, err := sourceHash(p.Dir)
	if err != nil {
		return "", false, err
	}
	cache, err := cacheDir()
	if err != nil {
		return "", false, err
	}
	dir := filepath.Join(cache, "managers", sum[:24])
	bin := filepath.Join(dir, "manager")
	if fileExists(bin) {
		now := time.Now()
		_ = os.Chtimes(dir, now, now) // recently used: pruned last
		return bin, true, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	if err := buildManager(ctx, p, bin+".tmp", goCmd); err != nil {
		_ = os.RemoveAll(dir)
		return "", false, err
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		return "", false, err
	}
	pruneManagers(filepath.Dir(dir), keepManagers)
	return bin, false, nil
}

// keepManagers bounds the manager cache: grading a class leaves one
// binary per distinct submission (tens of MB each).
const keepManagers = 24

// pruneManagers removes all but the newest keep builds under root.
func pruneManagers(root string, keep int) {
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) <= keep {
		return
	}
	type build struct {
		path string
		mod  time.Time
	}
	var builds []build
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.IsDir() {
			builds = append(builds, build{filepath.Join(root, e.Name()), info.ModTime()})
		}
	}
	sort.Slice(builds, func(i, j int) bool { return builds[i].mod.After(builds[j].mod) })
	for _, b := range builds[min(keep, len(builds)):] {
		_ = os.RemoveAll(b.path)
	}
}

func buildManager(ctx context.Context, p *Project, out, goCmd string) error {
	if goCmd == "" {
		goCmd = "go"
	}
	goBin, err := exec.LookPath(goCmd)
	if err != nil {
		return userr.Env("the Go toolchain is needed to build the operator, and "+goCmd+" was not found", "install Go 1.24 or newer")
	}
	pkg := "./cmd"
	if _, err := os.Stat(filepath.Join(p.Dir, "cmd", "main.go")); err != nil {
		pkg = "." // projects scaffolded before kubebuilder v4 keep main.go at the root
	}
	// -s -w: no symbol tables; the manager is never debugged from here and
	// linking is noticeably faster.
	cmd := exec.CommandContext(ctx, goBin, "build", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &BuildError{Dir: p.Dir, Output: buf.String(), Err: err}
	}
	return nil
}

// BuildError is a project that does not compile; Output holds the
// compiler's messages.
type BuildError struct {
	Dir    string
	Output string
	Err    error
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("the project in %s does not build: %s", e.Dir, FirstErrors(e.Output, 1))
}

// Unwrap lets userr find a code.
func (e *BuildError) Unwrap() error {
	return userr.Wrap(e.Err, userr.ExitFailure, e.Error(), "run `go build ./...` in the project and fix the errors")
}

// FirstErrors returns the first n compiler error lines of go build output.
func FirstErrors(out string, n int) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, l)
		if len(lines) == n {
			break
		}
	}
	if len(lines) == 0 {
		return "go build failed"
	}
	return strings.Join(lines, " | ")
}

// writeImpersonatingKubeconfig derives the manager's kubeconfig from the
// cluster's admin kubeconfig: same server and credentials, but every
// request impersonates the ServiceAccount, so the project's RBAC applies
// and the audit log names the operator.
func writeImpersonatingKubeconfig(adminPath, out, namespace, user string) error {
	cfg, err := clientcmd.LoadFromFile(adminPath)
	if err != nil {
		return err
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return fmt.Errorf("%s has no current context", adminPath)
	}
	auth := cfg.AuthInfos[ctx.AuthInfo]
	auth.Impersonate = user
	auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	ctx.Namespace = namespace
	return clientcmd.WriteToFile(*cfg, out)
}

// waitManagerReady polls the manager's /readyz (a process that has not
// bound its port offers nothing to watch) and gives up early when the
// supervisor counts a crash.
func waitManagerReady(ctx context.Context, port int, restartsFile string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	for {
		if n, _ := supervise.Restarts(restartsFile); n > 0 {
			return errors.New("it exited during start-up")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no ready answer on %s within %s", url, timeout)
		case <-tick.C:
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
