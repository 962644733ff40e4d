package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/freeport"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/logline"
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
	// MetricsPort is where the manager serves /metrics on 127.0.0.1
	// (0: not served, a record of an older labctl).
	MetricsPort int `json:"metricsPort,omitempty"`
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
	d := &localDeploy{c: c, p: p, opts: opts, s: opts.Streams}
	if d.s == nil {
		d.s, _, _ = iostreams.Test(false)
	}
	for _, phase := range []func(context.Context) error{d.install, d.build, d.credentials, d.start, d.awaitReady, d.swap, d.prune} {
		if err := phase(ctx); err != nil {
			return nil, err
		}
	}
	return operatorFor(p, d.rec, d.dir), nil
}

// localDeploy is one RunLocal, carried from phase to phase.
type localDeploy struct {
	c    *cluster.Cluster
	p    *Project
	opts LocalOptions
	s    *iostreams.IOStreams

	rec       localRecord
	applier   *kube.Applier
	applied   []kube.ObjectRef // what install applied, for the next deploy's prune
	live, dir string           // the slot of the manager running now ("" if none) and the new one's
	bin       string           // the manager binary, as the supervisor starts it
	// kubeconfig holds only the ServiceAccount token the supervisor renews.
	kubeconfig string
	duties     supervise.Duties
	logFile    string
	restarts   string
	starting   *iostreams.Step // the start-up step, open until awaitReady
}

// install applies config/default but the manager Deployment (whose
// namespace and ServiceAccount the manager process takes instead) and the
// webhook configurations no local Service could serve.
func (d *localDeploy) install(ctx context.Context) error {
	objs, err := d.p.RenderIn(ctx, d.opts.Box)
	if err != nil {
		return err
	}
	d.rec = localRecord{Name: d.p.Name, ProjectDir: d.p.Dir}
	var keep []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			if d.rec.Namespace == "" {
				d.rec.Namespace = o.GetNamespace()
				d.rec.ServiceAccount, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			}
			continue
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			fmt.Fprintf(d.s.ErrOut, "Skipping %s %s: webhooks are not served on the local provider.\n", o.GetKind(), o.GetName())
			continue
		}
		keep = append(keep, o)
	}
	if d.rec.Namespace == "" {
		return userr.Usage(d.p.Dir+"/config/default renders no manager Deployment", "check config/default/kustomization.yaml includes ../manager, as kubebuilder scaffolds it")
	}
	if d.rec.ServiceAccount == "" {
		d.rec.ServiceAccount = "default"
	}

	step := d.s.StartStep("Installing CRDs and RBAC from config/default")
	applier, err := kube.NewApplier(d.c.Config)
	if err != nil {
		step.Fail()
		return err
	}
	skipped, err := applier.Apply(ctx, keep)
	if err != nil {
		step.Fail()
		return userr.Wrap(err, userr.ExitFailure, "cannot install the project's manifests: "+err.Error(), "run `make manifests` in the project and check config/")
	}
	step.Done(fmt.Sprintf("%d objects", len(keep)-len(skipped)))
	for _, sk := range skipped {
		fmt.Fprintf(d.s.ErrOut, "Skipped %s %s: %s.\n", sk.Object.GetKind(), sk.Object.GetName(), sk.Reason)
	}
	d.applier, d.applied = applier, kube.RefsOf(keep)
	return nil
}

// appliedFile records what the last deploy of a project applied.
func appliedFile(c *cluster.Cluster, name string) string {
	return filepath.Join(operatorsDir(c), name+".applied.json")
}

// prune, once the new manager serves, deletes what the project's previous
// deploy applied and this one does not (a binding taken out of config/
// stops granting), and records what this one applied.
func (d *localDeploy) prune(ctx context.Context) error {
	file := appliedFile(d.c, d.p.Name)
	var prev []kube.ObjectRef
	if raw, err := os.ReadFile(file); err == nil {
		if err := json.Unmarshal(raw, &prev); err != nil {
			fmt.Fprintf(d.s.ErrOut, "Ignoring %s: %v.\n", file, err)
		}
	}
	pruned, err := d.applier.Prune(ctx, prev, d.applied)
	for _, r := range pruned {
		fmt.Fprintf(d.s.ErrOut, "Deleted %s: the project no longer has it.\n", r)
	}
	if err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot delete what the project no longer has: "+err.Error(), "delete it with kubectl, then run `labctl up` again")
	}
	raw, _ := json.MarshalIndent(d.applied, "", "  ")
	return os.WriteFile(file, raw, 0o644)
}

// build picks the new manager's slot and builds it there. The new manager
// starts beside the one running (if any) and replaces it only once it is
// ready: a redeploy that fails leaves the working operator serving.
func (d *localDeploy) build(ctx context.Context) error {
	d.live, d.dir = slotsFor(operatorsDir(d.c), d.p.Name)
	if err := stopOperator(ctx, d.dir); err != nil { // a half-started one of a killed deploy
		return err
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return err
	}
	step := d.s.StartStep("Building the manager (go build)")
	bin, reused, err := BuildManager(ctx, d.p, BuildOptions{Go: d.opts.Go, Box: d.opts.Box})
	if err != nil {
		step.Fail()
		return err
	}
	d.bin = bin
	d.rec.SourceHash, _ = operator.SourceFingerprint(d.p.Dir)
	if reused {
		step.Done("unchanged sources, reused")
	} else {
		step.Done()
	}
	return nil
}

// credentials gives the manager its only credential: a token of its
// ServiceAccount, in a kubeconfig of its own, renewed by the supervisor.
func (d *localDeploy) credentials(ctx context.Context) error {
	ns, sa := d.rec.Namespace, d.rec.ServiceAccount
	if _, err := kube.WaitFor(ctx, d.c.Config, corev1.SchemeGroupVersion.WithResource("serviceaccounts"), ns, sa, time.Minute, kube.Exists); err != nil {
		return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("the manager's ServiceAccount %s/%s did not appear: %v", ns, sa, err), "check config/rbac/service_account.yaml in the project")
	}
	kubeconfig, err := satoken.Issue(ctx, d.c.Config, d.dir, ns, sa)
	if err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot issue the manager's ServiceAccount token: "+err.Error(), "run `labctl down` and `labctl up` again")
	}
	d.kubeconfig = kubeconfig
	d.duties = supervise.Duties{Token: &satoken.Refresher{
		AdminKubeconfig: d.c.Kubeconfig, Namespace: ns, Name: sa, File: filepath.Join(d.dir, "token"),
	}}
	return nil
}

// start runs the manager under its supervisor (in the sandbox when there
// is one) and records it in the slot, so status, reset and down find it.
func (d *localDeploy) start(context.Context) error {
	port, err := freeport.Get()
	if err != nil {
		return err
	}
	metricsPort, err := freeport.Get()
	if err != nil {
		return err
	}
	d.rec.ProbePort, d.rec.MetricsPort = port, metricsPort
	d.logFile, d.restarts = filepath.Join(d.dir, "manager.log"), filepath.Join(d.dir, "restarts")
	_ = os.Remove(d.logFile)
	_ = os.Remove(d.restarts)
	bin := d.bin
	if d.opts.Box != nil {
		spec, inBox := managerSandbox(d.opts.Box, bin, d.dir, d.kubeconfig)
		raw, _ := json.Marshal(spec)
		d.duties.SandboxSpec = filepath.Join(d.dir, "sandbox.json")
		if err := os.WriteFile(d.duties.SandboxSpec, raw, 0o644); err != nil {
			return err
		}
		bin = inBox
	}
	path, args, env, err := supervise.CommandWith(d.logFile, d.restarts, d.opts.Limits, d.duties, []string{bin,
		"--kubeconfig=" + d.kubeconfig,
		// As the manager Deployment serves them (kubebuilder's default
		// config: HTTPS, each request authenticated and authorized by the
		// API server), on a port of this machine only.
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", port),
		"--leader-elect=false",
	})
	if err != nil {
		return err
	}
	how := operator.ServiceAccountUser(d.rec.Namespace, d.rec.ServiceAccount)
	if d.opts.Box != nil {
		how += fmt.Sprintf(", sandboxed as uid %d", d.opts.Box.UID)
	}
	step := d.s.StartStep(fmt.Sprintf("Starting the manager as %s", how))
	sup, err := proc.Start(proc.Spec{
		Name:         "manager supervisor",
		Path:         path,
		Args:         args,
		Env:          append(env, "KUBECONFIG="+d.kubeconfig, "ENABLE_WEBHOOKS=false"),
		Dir:          d.p.Dir,
		LogFile:      filepath.Join(d.dir, "supervisor.log"),
		TiedToParent: d.opts.TiedToParent,
	})
	if err != nil {
		step.Fail()
		return err
	}
	if err := proc.SaveRecord(filepath.Join(d.dir, proc.SupervisorRecord), sup.Record()); err != nil {
		step.Fail()
		return err
	}
	raw, _ := json.MarshalIndent(d.rec, "", "  ")
	if err := os.WriteFile(filepath.Join(d.dir, "operator.json"), raw, 0o644); err != nil {
		step.Fail()
		return err
	}
	d.starting = step // awaitReady ends it
	return nil
}

// awaitReady waits for the new manager's /readyz. One that crash-loops or
// hangs is stopped (or, with KeepUnready, kept in place of the old one:
// two managers never stay) and the error quotes what its log says.
func (d *localDeploy) awaitReady(ctx context.Context) error {
	timeout := d.opts.ReadyTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	err := waitManagerReady(ctx, d.rec.ProbePort, d.restarts, timeout)
	if err == nil {
		d.starting.Done()
		return nil
	}
	d.starting.Fail()
	if !d.opts.KeepUnready {
		_ = stopOperator(context.WithoutCancel(ctx), d.dir)
	} else if d.live != "" {
		_ = stopOperator(context.WithoutCancel(ctx), d.live)
		d.live = ""
	}
	var tail []string
	for _, l := range proc.Tail(d.logFile, 60) {
		if !strings.HasPrefix(l, "==== labctl supervisor") {
			tail = append(tail, l) // the manager's own words, not the supervisor's notes
		}
	}
	if d.s.Verbose {
		for _, l := range tail[max(0, len(tail)-6):] {
			fmt.Fprintln(d.s.ErrOut, d.s.Styles().Muted.Render("  "+l))
		}
	}
	still := ""
	if d.live != "" {
		still = " (the operator deployed before keeps running)"
	}
	return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("the manager did not become ready: %v; its log says: %s%s", err, logline.Cut(logline.Cause(tail), 200), still),
		"see "+d.logFile+"; fix the operator and run `labctl up` again")
}

// swap: the new manager serves, the one it replaces goes.
func (d *localDeploy) swap(ctx context.Context) error {
	if d.live == "" {
		return nil
	}
	if err := stopOperator(context.WithoutCancel(ctx), d.live); err != nil {
		return err
	}
	_ = os.RemoveAll(d.live)
	return nil
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
		Metrics: scrapeAt(rec.MetricsPort),
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
