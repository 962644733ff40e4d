package checks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/satoken"
)

// The project's tests that need a cluster (the integration tests of lab
// 6.3) run against the lab's cluster and the operator labctl deployed, as
// a ServiceAccount of their own: its kubeconfig holds a token and nothing
// else, and a Role grants it only what the lab says the tests need, in
// the one namespace they use. So a test cannot pass by doing the
// operator's work itself (creating the StatefulSet it then finds), and
// the audit log tells its requests from everyone else's.

func init() {
	Register(Typed(Definition{
		Name:       "cluster-tests",
		Namespaced: true,
		Doc:        "the project's tests that need a cluster (integration tests) pass against the lab cluster and the deployed operator, run as a ServiceAccount granted only what the lab says they need",
	}, runClusterTests))
}

type clusterTestsParams struct {
	// Packages are go test's package patterns (./test/integration/...).
	Packages []string `json:"packages"`
	// Access is what the tests may do.
	Access testAccess `json:"access"`
	// Skip is a regular expression for the Ginkgo specs the lab leaves
	// out (ginkgo -skip): the ones that need what labctl's cluster does not
	// serve.
	Skip string `json:"skip,omitempty"`
}

// testAccess is the tests' identity's permissions: Rules, in Namespace.
type testAccess struct {
	// Namespace is where the tests work (the course's use default).
	Namespace string              `json:"namespace"`
	Rules     []rbacv1.PolicyRule `json:"rules"`
}

func (p *clusterTestsParams) Validate() error {
	if len(p.Packages) == 0 {
		return errors.New("needs packages")
	}
	if p.Access.Namespace == "" || len(p.Access.Rules) == 0 {
		return errors.New("needs access: namespace and rules")
	}
	if _, err := regexp.Compile(p.Skip); err != nil {
		return fmt.Errorf("skip: %w", err)
	}
	return nil
}

func (p *clusterTestsParams) key(c *Context) string {
	return c.ProjectDir() + " " + strings.Join(p.Packages, " ")
}

// clusterTestsIdentity is the ServiceAccount the tests run as.
const clusterTestsIdentity = "labctl-cluster-tests"

// clusterSuite is the tests compiled once, and the identity they run as.
type clusterSuite struct {
	bins []gobuild.TestBinary
	// failed: the tests do not compile.
	failed *gobuild.TestRun
	// user is the identity's name in the audit log; kubeconfig holds its
	// token; read are the directories a run reads.
	user       string
	kubeconfig string
	read       []string
	skip       string
	// binTimeout is every run's -test.timeout: the same for all (see run).
	binTimeout time.Duration
	err        error
}

// prepareClusterSuite compiles the tests and makes their identity, once
// per run.
func prepareClusterSuite(ctx context.Context, c *Context, p *clusterTestsParams) *clusterSuite {
	return c.run.once("cluster-tests suite "+p.key(c), func() any {
		s := &clusterSuite{skip: p.Skip, binTimeout: c.Timeout + 15*time.Second}
		binDir, err := c.run.scratchDir("labctl-cluster-tests-")
		if err != nil {
			s.err = err
			return s
		}
		ctx, cancel := context.WithTimeout(ctx, testLimit(ctx, c))
		defer cancel()
		base := gobuild.Command{Dir: c.ProjectDir(), Write: []string{binDir}}
		s.bins, s.failed, err = gobuild.CompileTests(ctx, c.goRunner(), base, p.Packages, nil, binDir)
		if s.err = testRunError(ctx, err, testLimit(ctx, c)); s.err != nil || s.failed != nil || len(s.bins) == 0 {
			return s
		}
		credDir, err := c.run.scratchDir("labctl-cluster-tests-cred-")
		if err == nil {
			s.user, s.kubeconfig, err = clusterTestsCredentials(ctx, c, p.Access, credDir)
		}
		if err != nil {
			s.err = fmt.Errorf("giving the tests an identity: %w", err)
		}
		s.read = []string{binDir, credDir}
		start := time.Now()
		c.run.undoAtEnd(func(ctx context.Context) []string {
			if evs, err := c.syncAudit(ctx); err == nil {
				s.removeLeftovers(ctx, c, evs, start)
			}
			return nil
		})
		return s
	}).(*clusterSuite)
}

// clusterTestsCredentials creates the tests' ServiceAccount (in the run's
// namespace, gone with it) and its Role and RoleBinding in the tests'
// namespace (removed at the run's end), and writes a kubeconfig with its
// token whose context is that namespace.
func clusterTestsCredentials(ctx context.Context, c *Context, access testAccess, dir string) (user, kubeconfig string, err error) {
	ns := c.Namespace()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: clusterTestsIdentity, Namespace: ns}}
	if err := c.Client().Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", "", err
	}
	// One name per run: two verifications of one cluster do not share it.
	name := clusterTestsIdentity + "-" + ns
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: access.Namespace}, Rules: access.Rules}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: access.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: clusterTestsIdentity, Namespace: ns}},
	}
	c.run.undoAtEnd(func(ctx context.Context) []string {
		var notes []string
		for kind, obj := range map[string]client.Object{"RoleBinding": binding, "Role": role} {
			if err := c.Client().Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				notes = append(notes, fmt.Sprintf("cleanup: could not delete the tests' %s %s/%s: %v", kind, access.Namespace, name, oneLine(err)))
			}
		}
		return notes
	})
	for _, obj := range []client.Object{role, binding} {
		if err := c.Client().Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", "", err
		}
	}
	token, _, err := satoken.Request(ctx, c.Config(), ns, clusterTestsIdentity, satoken.TTL)
	if err != nil {
		return "", "", err
	}
	tokenFile, kubeconfig := filepath.Join(dir, "token"), filepath.Join(dir, "kubeconfig")
	if err := satoken.WriteToken(tokenFile, token); err != nil {
		return "", "", err
	}
	if err := satoken.WriteKubeconfig(c.Config(), kubeconfig, access.Namespace, tokenFile); err != nil {
		return "", "", err
	}
	return "system:serviceaccount:" + ns + ":" + clusterTestsIdentity, kubeconfig, nil
}

// removeLeftovers deletes what the tests created since start (audit
// records evs) and is still there: a run stopped half-way leaves its
// objects behind. The operator's finalizers still run.
func (s *clusterSuite) removeLeftovers(ctx context.Context, c *Context, evs []AuditEvent, start time.Time) {
	for _, ev := range evs {
		o := ev.ObjectRef
		if !ev.By(s.user) || ev.Verb != "create" || o == nil || o.Name == "" || o.Subresource != "" || o.APIVersion == "" ||
			ev.Code() < 200 || ev.Code() >= 300 || ev.RequestReceivedTimestamp.Before(start) {
			continue
		}
		gvr := schema.GroupVersionResource{Group: o.APIGroup, Version: o.APIVersion, Resource: o.Resource}
		_ = c.Dynamic().Resource(gvr).Namespace(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}
}

// suiteRun is one run of the cluster tests.
type suiteRun struct {
	run *gobuild.TestRun
	// stalled: still running when its limit ended it (a test waiting for
	// what the operator never did).
	stalled bool
	start   time.Time
	took    time.Duration
	err     error
	// conflicts are the tests' own writes the API server refused with a
	// conflict (409), in a run that failed on them (lostRace); lost is how
	// many runs before this one failed so, firstConflicts the first's.
	conflicts, firstConflicts []string
	lost                      int
}

// lostRace: the run failed on the tests' own write that conflicted with
// the operator's, and on nothing else (a run stopped while a test still
// waited did not).
func (r suiteRun) lostRace() bool {
	return !r.stalled && len(r.conflicts) > 0 && r.run != nil && failedOnConflict(r.run)
}

// failed: the run ended without every test passing.
func (r suiteRun) failed() bool {
	return r.stalled || r.run != nil && len(r.run.Failed) > 0
}

// ownConflicts are the writes by user since start that the API server
// refused with a conflict (409): the object changed between the tests'
// read and their write (the operator wrote it), and they sent the copy
// they had. Each says how long after the tests' last fresh copy of the
// object (a get, list, create or successful write) it was sent. A
// create's 409 (already exists) is not one.
func ownConflicts(evs []AuditEvent, user string, start time.Time) []string {
	fresh := map[string]time.Time{}
	var seen []string
	for _, ev := range evs {
		o := ev.ObjectRef
		if !ev.By(user) || o == nil || ev.RequestReceivedTimestamp.Before(start) {
			continue
		}
		obj := o.Resource + " " + o.Namespace + "/" + o.Name
		if ev.Code() >= 200 && ev.Code() < 300 {
			switch ev.Verb {
			case "get", "create", "update", "patch":
				fresh[obj] = ev.StageTimestamp
			case "list":
				// Every object of the resource in the namespace.
				fresh[o.Resource+" "+o.Namespace+"/"] = ev.StageTimestamp
			}
			continue
		}
		if ev.Code() != 409 || (ev.Verb != "update" && ev.Verb != "patch") {
			continue
		}
		what := ev.Verb + " of " + o.Resource + " " + o.Namespace + "/" + o.Name
		if o.Subresource != "" {
			what += " (" + o.Subresource + ")"
		}
		var last time.Time
		for _, l := range []time.Time{fresh[obj], fresh[o.Resource+" "+o.Namespace+"/"]} {
			if l.After(last) && !l.After(ev.RequestReceivedTimestamp) {
				last = l
			}
		}
		if !last.IsZero() {
			what += fmt.Sprintf(", sent %s after they read it", roundDur(ev.RequestReceivedTimestamp.Sub(last)))
		}
		if !slices.Contains(seen, what) {
			seen = append(seen, what)
		}
	}
	return seen
}

// failedOnConflict: every failure (each failed Ginkgo spec, each other
// failed test) printed the API server's answer to a stale write, so the
// conflict is what failed them; a spec that failed on anything else is a
// failure of its own, whatever the others lost.
func failedOnConflict(run *gobuild.TestRun) bool {
	failures := run.Failures()
	return len(failures) > 0 && !slices.ContainsFunc(failures, func(f string) bool {
		return !strings.Contains(f, "the object has been modified")
	})
}

// readConflicts sets the conflicts of a failed run r (none for one that
// passed, or when the audit log cannot be read).
func (s *clusterSuite) readConflicts(ctx context.Context, c *Context, r *suiteRun) {
	if r.err != nil || !r.failed() || c.Env().AuditLog == nil {
		return
	}
	if evs, err := c.syncAudit(ctx); err == nil {
		r.conflicts = ownConflicts(evs, s.user, r.start)
	}
}

// run runs every package's tests once, as the tests' identity, within
// limit (0: the check's timeout). Every run is invoked alike (the
// baseline, the control, each mutant's; no fail-fast, one -test.timeout):
// tests that could tell one run from another by their own command line
// could pass the baseline and fail the others, whatever the operator did.
func (s *clusterSuite) run(ctx context.Context, c *Context, limit time.Duration) suiteRun {
	outer := testLimit(ctx, c)
	if limit == 0 || limit > outer {
		limit = outer
	}
	r := suiteRun{start: time.Now()}
	runCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var stdout bytes.Buffer
	for _, bin := range s.bins {
		// The binary's own timeout, after labctl's: a box whose processes
		// outlive their cancelled command still ends.
		flags := []string{"-test.timeout=" + s.binTimeout.String()}
		if bin.Ginkgo && s.skip != "" {
			flags = append(flags, "-ginkgo.skip="+s.skip)
		}
		// The tests reach the cluster through KUBECONFIG alone: no
		// in-cluster configuration, no home directory's.
		env := []string{"KUBECONFIG=" + s.kubeconfig, "KUBERNETES_SERVICE_HOST=", "HOME=" + os.TempDir()}
		cmd := bin.Command(gobuild.Command{Env: env, Read: s.read, Stdout: &stdout}, flags...)
		_, err := c.goRunner()(runCtx, cmd)
		if runCtx.Err() != nil && ctx.Err() == nil {
			r.stalled = true
			break
		}
		if err := testRunError(runCtx, err, limit); err != nil {
			r.err = err
			break
		}
	}
	r.took = time.Since(r.start)
	r.run = gobuild.ParseTestEvents(stdout.Bytes())
	return r
}

// baseline is the tests' run against the operator as deployed, once per
// run. A run that failed where the tests' own write conflicted with the
// operator's (a Get, a change and an Update without a retry, as the
// course's lifecycle spec does) may have lost a race whose odds the
// machine's load sets: it runs again, up to raceRetries times. Tests that
// lose every time (a copy read long before the update) fail.
func (s *clusterSuite) baseline(ctx context.Context, c *Context, p *clusterTestsParams) suiteRun {
	return c.run.once("cluster-tests baseline "+p.key(c), func() any {
		r := s.run(ctx, c, 0)
		s.readConflicts(ctx, c, &r)
		first := r.conflicts
		for lost := 1; r.lostRace() && lost <= raceRetries; lost++ {
			r = s.run(ctx, c, 0)
			r.firstConflicts, r.lost = first, lost
			s.readConflicts(ctx, c, &r)
		}
		return r
	}).(suiteRun)
}

// clusterBaseline is the suite and its baseline run, or the outcome that
// says why there is none.
func clusterBaseline(ctx context.Context, c *Context, p *clusterTestsParams) (*clusterSuite, suiteRun, Outcome, bool) {
	if c.ProjectDir() == "" {
		return nil, suiteRun{}, skip("no project directory whose tests could run (pass --project DIR)"), false
	}
	s := prepareClusterSuite(ctx, c, p)
	switch {
	case s.err != nil:
		return nil, suiteRun{}, testsUnavailable(s.err), false
	case s.failed != nil:
		_, out, _ := judgeTestRun(s.failed, p.Packages, "", nil)
		return s, suiteRun{run: s.failed}, out, false
	case len(s.bins) == 0:
		out := fail("go test %s has no package with tests: write them in *_test.go files there", strings.Join(p.Packages, " "))
		return s, suiteRun{}, out, false
	}
	b := s.baseline(ctx, c, p)
	if b.err != nil {
		return s, b, testsUnavailable(b.err), false
	}
	return s, b, Outcome{}, true
}

func runClusterTests(ctx context.Context, c *Context, p *clusterTestsParams) Outcome {
	expected := "go test " + strings.Join(p.Packages, " ") + " passes against the lab cluster, with at least one test"
	_, b, out, ok := clusterBaseline(ctx, c, p)
	if !ok {
		out.Expected = expected
		return out
	}
	if b.stalled {
		out := testsFailed(b.run, expected)
		out.Message = fmt.Sprintf("the tests did not finish within %s: %s", roundDur(b.took), out.Message)
		return out
	}
	msg, out, ok := judgeTestRun(b.run, p.Packages, expected, nil)
	if !ok {
		if b.lostRace() {
			out.Message = fmt.Sprintf("%s; in all %d runs the API server refused with a conflict (409) the tests' own %s: the operator had written the object since they read it. Get it again right before the update, or wrap the Get and the update in retry.RetryOnConflict (k8s.io/client-go/util/retry)", out.Message, b.lost+1, strings.Join(b.conflicts, "; "))
		}
		return out
	}
	msg = fmt.Sprintf("%s against the lab cluster, as %s (%s)", msg, clusterTestsIdentity, roundDur(b.took))
	if b.lost > 0 {
		msg += fmt.Sprintf("; they passed on run %d, after %d run(s) failed where the API server refused with a conflict (409) their own %s: retry such an update (retry.RetryOnConflict with the Get inside), or it fails whenever the operator writes the object in between", b.lost+1, b.lost, strings.Join(b.firstConflicts, "; "))
	}
	return pass("%s", msg)
}
