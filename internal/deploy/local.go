package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/freeport"
	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/satoken"
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
	// Box, when set, is the sandbox the manager is built and run in, as
	// an unprivileged user (grading untrusted code); p must be the box's
	// private copy.
	Box *sandbox.Box
	// KeepUnready leaves a manager that did not become ready running under
	// its supervisor, for a caller that verifies it anyway (grade: what
	// needs no running manager, schema and source, still counts). Without
	// it such a manager is stopped, never left crash-looping.
	KeepUnready bool
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
// with `go build` and run as a supervised process whose kubeconfig holds
// only a token of the manager's ServiceAccount (renewed by the supervisor). A manager already running for
// the same project name is replaced once the new one is ready; if the new
// one does not become ready, the old one keeps running.
func RunLocal(ctx context.Context, c *cluster.Cluster, p *Project, opts LocalOptions) (*operator.Operator, error) {
	if c.Env.StateDir == "" {
		return nil, userr.New("running an operator as a local process needs a local cluster", "use `labctl up --provider local`, or deploy in-cluster on kind")
	}
	s := opts.Streams
	if s == nil {
		s, _, _ = iostreams.Test(false)
	}
	objs, err := p.RenderIn(ctx, opts.Box)
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
	applier, err := kube.NewApplier(c.Config)
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

	// The new manager starts beside the one running (if any) and replaces
	// it only once it is ready: a redeploy that fails leaves the working
	// operator serving.
	live, dir := slotsFor(operatorsDir(c), p.Name)
	if err := stopOperator(ctx, dir); err != nil { // a half-started one of a killed deploy
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	step = s.StartStep("Building the manager (go build)")
	bin, reused, err := BuildManager(ctx, p, BuildOptions{Go: opts.Go, Box: opts.Box})
	if err != nil {
		step.Fail()
		return nil, err
	}
	rec.SourceHash, _ = operator.SourceFingerprint(p.Dir)
	if reused {
		step.Done("unchanged sources, reused")
	} else {
		step.Done()
	}

	identity := operator.ServiceAccountUser(rec.Namespace, rec.ServiceAccount)
	// The manager's only credential: a token of its ServiceAccount.
	if _, err := kube.WaitFor(ctx, c.Config, corev1.SchemeGroupVersion.WithResource("serviceaccounts"), rec.Namespace, rec.ServiceAccount, time.Minute, kube.Exists); err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("the manager's ServiceAccount %s/%s did not appear: %v", rec.Namespace, rec.ServiceAccount, err), "check config/rbac/service_account.yaml in the project")
	}
	kubeconfig, err := satoken.Issue(ctx, c.Config, dir, rec.Namespace, rec.ServiceAccount)
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, "cannot issue the manager's ServiceAccount token: "+err.Error(), "run `labctl down` and `labctl up` again")
	}
	duties := supervise.Duties{Token: &satoken.Refresher{
		AdminKubeconfig: c.Kubeconfig, Namespace: rec.Namespace, Name: rec.ServiceAccount, File: filepath.Join(dir, "token"),
	}}
	port, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	rec.ProbePort = port
	logFile, restartsFile := filepath.Join(dir, "manager.log"), filepath.Join(dir, "restarts")
	_ = os.Remove(logFile)
	_ = os.Remove(restartsFile)
	if opts.Box != nil {
		spec, inBox := managerSandbox(opts.Box, bin, dir, kubeconfig)
		raw, _ := json.Marshal(spec)
		duties.SandboxSpec = filepath.Join(dir, "sandbox.json")
		if err := os.WriteFile(duties.SandboxSpec, raw, 0o644); err != nil {
			return nil, err
		}
		bin = inBox
	}
	path, args, env, err := supervise.CommandWith(logFile, restartsFile, opts.Limits, duties, []string{bin,
		"--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=0",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", port),
		"--leader-elect=false",
	})
	if err != nil {
		return nil, err
	}
	how := identity
	if opts.Box != nil {
		how += fmt.Sprintf(", sandboxed as uid %d", opts.Box.UID)
	}
	step = s.StartStep(fmt.Sprintf("Starting the manager as %s", how))
	sup, err := proc.Start(proc.Spec{
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
	if err := proc.SaveRecord(filepath.Join(dir, proc.SupervisorRecord), sup.Record()); err != nil {
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
		// A manager that crash-loops or hangs is not left running.
		if !opts.KeepUnready {
			_ = stopOperator(context.WithoutCancel(ctx), dir)
		} else if live != "" {
			// The caller keeps the new one: two managers never stay.
			_ = stopOperator(context.WithoutCancel(ctx), live)
			live = ""
		}
		var tail []string
		for _, l := range proc.Tail(logFile, 60) {
			if !strings.HasPrefix(l, "==== labctl supervisor") {
				tail = append(tail, l) // the manager's own words, not the supervisor's notes
			}
		}
		if s.Verbose {
			for _, l := range tail[max(0, len(tail)-6):] {
				fmt.Fprintln(s.ErrOut, s.Styles().Muted.Render("  "+l))
			}
		}
		still := ""
		if live != "" {
			still = " (the operator deployed before keeps running)"
		}
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("the manager did not become ready: %v; its log says: %s%s", err, truncate(managerErrorLine(tail), 200), still),
			"see "+logFile+"; fix the operator and run `labctl up` again")
	}
	step.Done()
	if live != "" {
		// The swap: the new manager serves, the one it replaces goes.
		if err := stopOperator(context.WithoutCancel(ctx), live); err != nil {
			return nil, err
		}
		_ = os.RemoveAll(live)
	}
	return operatorFor(p, rec, dir), nil
}

// nextSlot names the second directory of a project's manager: a redeploy
// starts in whichever of the two holds no running manager.
const nextSlot = ".next"

// slotsFor returns the directory of the project's running manager ("" when
// none runs) and the one to start its replacement in.
func slotsFor(operators, name string) (live, next string) {
	first, second := filepath.Join(operators, name), filepath.Join(operators, name+nextSlot)
	switch {
	case supervised(first):
		return first, second
	case supervised(second):
		return second, first
	}
	_ = os.RemoveAll(second) // what a stopped manager left
	return "", first
}

func operatorFor(p *Project, rec localRecord, dir string) *operator.Operator {
	return &operator.Operator{
		ProjectName:    p.Name,
		ProjectDir:     p.Dir,
		Namespace:      rec.Namespace,
		ServiceAccount: rec.ServiceAccount,
		Identity:       operator.ServiceAccountUser(rec.Namespace, rec.ServiceAccount),
		SourceHash:     rec.SourceHash,
		Logs: func(context.Context) ([]byte, error) {
			return os.ReadFile(filepath.Join(dir, "manager.log"))
		},
		Restarts: func(context.Context) (int, error) {
			return supervise.Restarts(filepath.Join(dir, "restarts"))
		},
		CPU: func(context.Context) (time.Duration, error) {
			for _, r := range proc.LoadRecords(filepath.Join(dir, proc.SupervisorRecord)) {
				if r.Alive() {
					return proc.TreeCPU(r.PID)
				}
			}
			return 0, errors.New("the manager's supervisor is not running")
		},
	}
}

// CurrentLocal returns the operator running on a local cluster that a
// verification of projectDir, or of a lab built on the reference project
// ref ("" = the Database operator), judges; or an error saying how to
// deploy one. A course keeps one cluster across its modules, so several
// operators may run: the one built from projectDir wins, then the one
// whose kubebuilder project is ref's (the lab's), then the only one. Never
// whichever sorts first: with the hello-world and the postgres operators
// both running, that judged the wrong one's ServiceAccount.
func CurrentLocal(c *cluster.Cluster, projectDir, ref string) (*operator.Operator, error) {
	entries, err := os.ReadDir(operatorsDir(c))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var running []*operator.Operator
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
		if !supervised(dir) {
			continue
		}
		running = append(running, operatorFor(&Project{Dir: rec.ProjectDir, Name: rec.Name}, rec, dir))
	}
	if op := pickOperator(running, projectDir, ref); op != nil {
		return op, nil
	}
	return nil, userr.New(fmt.Sprintf("no operator is running on cluster %q", c.Name), "run `labctl up` (or `labctl up --project DIR`) first")
}

// pickOperator chooses among the running operators (see CurrentLocal);
// nil when none runs. With several and none of projectDir or of ref's
// project, the first: verify then warns that it belongs to another lab.
func pickOperator(running []*operator.Operator, projectDir, ref string) *operator.Operator {
	if len(running) == 0 {
		return nil
	}
	if projectDir != "" {
		want := cleanDir(projectDir)
		for _, op := range running {
			if op.ProjectDir != "" && cleanDir(op.ProjectDir) == want {
				return op
			}
		}
	}
	if r, err := reference.Lookup(ref); err == nil && r.ProjectName != "" {
		for _, op := range running {
			if op.ProjectName == r.ProjectName {
				return op
			}
		}
	}
	return running[0]
}

// cleanDir is dir made absolute with its symbolic links resolved, for
// comparing two spellings of one directory.
func cleanDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return filepath.Clean(dir)
}

// StopLocal stops every operator labctl runs on a local cluster.
func StopLocal(ctx context.Context, c *cluster.Cluster) error {
	return stopOperator(ctx, operatorsDir(c))
}

// stopOperator stops the supervisors recorded in dir (an operator's
// directory) or in its subdirectories (all operators of a cluster); each
// stops its manager first.
func stopOperator(ctx context.Context, dir string) error {
	recs := append(proc.LoadRecords(filepath.Join(dir, proc.SupervisorRecord)),
		proc.LoadRecords(filepath.Join(dir, "*", proc.SupervisorRecord))...)
	for _, r := range recs {
		if err := proc.StopRecord(ctx, r, 15*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// supervised: the operator in dir has a running supervisor.
func supervised(dir string) bool {
	for _, r := range proc.LoadRecords(filepath.Join(dir, proc.SupervisorRecord)) {
		if r.Alive() {
			return true
		}
	}
	return false
}

// BuildOptions tune BuildManager.
type BuildOptions struct {
	// Go is the go command (default "go").
	Go string
	// Box, when set, is where the project is built: the go command runs
	// inside this sandbox as its unprivileged user (grading). The
	// project's modules are downloaded first by the caller with `go mod
	// download`, which runs no code of the project.
	Box *sandbox.Box
}

// BuildManager returns the project's manager executable, built with
// `go build` into the user's cache under a hash of its sources' contents
// and of the Go toolchain, so a new cluster or a redeploy of unchanged
// code skips even the link step. Cached binaries are read-only and their
// own hash is checked before one is reused (a binary changed after it was
// built is built again). Callers may build first (grading does) so a
// project that does not compile costs no cluster; RunLocal then finds the
// binary cached.
func BuildManager(ctx context.Context, p *Project, o BuildOptions) (path string, reused bool, err error) {
	gt, err := toolchainOf(ctx, o.Go)
	if err != nil {
		return "", false, err
	}
	sum, err := operator.Fingerprint(p.Dir, gt.id())
	if err != nil {
		return "", false, err
	}
	cache, err := cacheDir()
	if err != nil {
		return "", false, err
	}
	dir := filepath.Join(cache, "managers", sum[:32])
	bin := filepath.Join(dir, "manager")
	if cachedIntact(bin) {
		now := time.Now()
		_ = os.Chtimes(dir, now, now) // recently used: pruned last
		return bin, true, nil
	}
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	built := bin + ".tmp"
	if o.Box != nil {
		built = filepath.Join(o.Box.Home(), "manager.build")
		err = buildSandboxed(ctx, p, gt, o.Box, built)
	} else {
		err = buildManager(ctx, p, built, gt.goBin)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", false, err
	}
	if err := storeManager(built, bin); err != nil {
		_ = os.RemoveAll(dir)
		return "", false, err
	}
	pruneManagers(filepath.Dir(dir), keepManagers)
	return bin, false, nil
}

// cachedIntact: bin exists and its content still has the hash recorded
// when it was stored.
func cachedIntact(bin string) bool {
	want, err := os.ReadFile(bin + ".sha256")
	if err != nil {
		return false
	}
	got, err := fileHash(bin)
	return err == nil && got == strings.TrimSpace(string(want))
}

// storeManager copies a fresh build into the cache, read-only, with its
// hash beside it.
func storeManager(built, bin string) error {
	in, err := os.Open(built)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := bin + ".tmp"
	if tmp != built {
		out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o555); err != nil {
		return err
	}
	sum, err := fileHash(tmp)
	if err != nil {
		return err
	}
	if err := os.WriteFile(bin+".sha256", []byte(sum+"\n"), 0o444); err != nil {
		return err
	}
	return os.Rename(tmp, bin)
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

func buildManager(ctx context.Context, p *Project, out, goBin string) error {
	pkg := mainPackage(p)
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
		return &gobuild.Error{Dir: p.Dir, Output: buf.String(), Err: err}
	}
	return nil
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

// managerErrorLine picks what a crashed manager said that matters: a
// panic's or fatal error's first line, else the last line logging an
// error, else the last line. A stack trace ends in runtime frames
// (runtime/proc.go:290) that explain nothing.
func managerErrorLine(tail []string) string {
	if len(tail) == 0 {
		return "no output"
	}
	for _, prefix := range []string{"panic: ", "fatal error: "} {
		for _, l := range tail {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
	}
	for i := len(tail) - 1; i >= 0; i-- {
		if l := strings.ToLower(tail[i]); strings.Contains(l, "error") && !strings.HasPrefix(strings.TrimSpace(l), "/") {
			return tail[i]
		}
	}
	return tail[len(tail)-1]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
