package checks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// What the cluster tests catch is judged with mutants of the deployed
// operator that need no rebuild: an admission policy refuses one kind of
// the operator's writes (its Service never created, its StatefulSet never
// scaled, its finalizer never removed), to the operator alone, while the
// tests run once more. Tests that check what the operator does fail, or
// wait for it until labctl stops them; tests that check nothing pass.

func init() {
	Register(Typed(Definition{
		Name:       "cluster-tests-reach",
		Namespaced: true,
		Doc:        "the project's cluster tests reach the API server with the lab's custom type registered in their client: the audit log shows their successful requests about it",
	}, runClusterTestsReach))
	Register(Typed(Definition{
		Name:       "cluster-tests-catch",
		Namespaced: true,
		Doc:        "the project's cluster tests fail when the deployed operator is made to skip one of its writes (an admission policy refuses it to the operator alone): tests that pass whatever the operator does test nothing",
	}, runClusterTestsCatch))
}

type clusterReachParams struct {
	clusterTestsParams
	// Kind is the custom resource the tests' client must know.
	Kind string `json:"kind"`
}

func (p *clusterReachParams) Validate() error {
	if p.Kind == "" {
		return errors.New("needs kind")
	}
	return p.clusterTestsParams.Validate()
}

// testsRequests are the audit records of what the tests' identity asked
// about gvr's resource since the baseline started.
func runClusterTestsReach(ctx context.Context, c *Context, p *clusterReachParams) Outcome {
	if c.Env().AuditLog == nil {
		return skip("this cluster has no API audit log labctl can read (an existing cluster?), so the tests' requests cannot be seen")
	}
	gvr, err := c.Resolve(labs.Ref{Kind: p.Kind})
	if err != nil {
		return errorf("%v", err)
	}
	s, b, out, ok := clusterBaseline(ctx, c, &p.clusterTestsParams)
	if !ok {
		if s != nil && s.failed != nil {
			// Charged once, where the suite is run.
			return skip("the tests do not compile, so whether their client knows %s cannot be told", p.Kind)
		}
		return out
	}
	evs, err := c.syncAudit(ctx)
	if err != nil {
		return errorf("%v", err)
	}
	verbs := map[string]int{}
	for _, ev := range evs {
		o := ev.ObjectRef
		if ev.By(s.user) && o != nil && o.Resource == gvr.Resource && o.APIGroup == gvr.Group &&
			!ev.RequestReceivedTimestamp.Before(b.start) && ev.Code() >= 200 && ev.Code() < 300 {
			verbs[ev.Verb]++
		}
	}
	out = Outcome{Expected: fmt.Sprintf("requests about %s by the tests' client that the API server answered", gvr.Resource)}
	if len(verbs) == 0 {
		out.Status = report.Fail
		out.Message = fmt.Sprintf("the tests sent no request about %s that succeeded", gvr.Resource)
		if lines := unregisteredKind(b); lines != "" {
			out.Message += ": their client does not know the type (" + lines + "); register it with " + gvr.Group + "'s AddToScheme on the scheme the client is built with (client.Options{Scheme: ...})"
		} else {
			out.Message += ": build the client from the kubeconfig (config.GetConfig()) with a scheme that has the type, and use it in the specs"
		}
		return out
	}
	var seen []string
	for _, v := range slices.Sorted(maps.Keys(verbs)) {
		seen = append(seen, fmt.Sprintf("%s ×%d", v, verbs[v]))
	}
	return pass("the tests' client sent requests about %s and the API server answered them (%s)", gvr.Resource, strings.Join(seen, ", "))
}

// unregisteredKind is the line of the tests' output where the client
// refused a type its scheme does not have.
func unregisteredKind(b suiteRun) string {
	if b.run == nil {
		return ""
	}
	for _, l := range b.run.Lines {
		if i := strings.Index(l, "no kind is registered"); i >= 0 {
			return strings.TrimSpace(l[i:min(len(l), i+160)])
		}
	}
	return ""
}

type clusterCatchParams struct {
	clusterTestsParams
	// Mutants each refuse one kind of the operator's writes.
	Mutants []operatorMutant `json:"mutants"`
}

// operatorMutant is a deployed operator that skips one kind of write: an
// admission policy refuses the operator's Operations on Resource (of
// APIGroup) when the CEL condition When holds (always when empty).
type operatorMutant struct {
	Name string `json:"name"`
	// Doc ends "an operator that ...".
	Doc        string   `json:"doc"`
	APIGroup   string   `json:"apiGroup"`
	Resource   string   `json:"resource"`
	Operations []string `json:"operations"`
	When       string   `json:"when,omitempty"`
	// Excuse is the course's own test missing this mutant: it warns, and
	// only when the tests did look.
	Excuse *mutantExcuse `json:"excuse,omitempty"`
}

// mutantExcuse: the tests read the object of Resource again after they
// sent After about it (they meant to check what the operator did with
// it), yet passed: the course's own check does that (a Get after the
// Delete whose condition holds whether the object is gone or not).
type mutantExcuse struct {
	After string `json:"after"`
	Why   string `json:"why"`
}

// excuses tells whether the tests' requests since start (evs) show what
// the excuse describes: a get of an object of m's resource after their
// After of that object.
func (m operatorMutant) excuses(evs []AuditEvent, user string, start time.Time) bool {
	if m.Excuse == nil {
		return false
	}
	sent := map[string]bool{}
	for _, ev := range evs {
		o := ev.ObjectRef
		if !ev.By(user) || o == nil || o.Resource != m.Resource || o.APIGroup != m.APIGroup || o.Subresource != "" || ev.RequestReceivedTimestamp.Before(start) {
			continue
		}
		key := o.Namespace + "/" + o.Name
		switch {
		case ev.Verb == m.Excuse.After && ev.Code() >= 200 && ev.Code() < 300:
			sent[key] = true
		case ev.Verb == "get" && sent[key]:
			return true
		}
	}
	return false
}

func (p *clusterCatchParams) Validate() error {
	if len(p.Mutants) == 0 {
		return errors.New("needs mutants")
	}
	for _, m := range p.Mutants {
		if m.Name == "" || m.Doc == "" || m.Resource == "" || len(m.Operations) == 0 {
			return fmt.Errorf("mutant %q needs name, doc, resource and operations", m.Name)
		}
		if e := m.Excuse; e != nil && (e.After == "" || e.Why == "") {
			return fmt.Errorf("mutant %s: excuse needs after and why", m.Name)
		}
		for _, op := range m.Operations {
			if !slices.Contains([]string{"CREATE", "UPDATE", "DELETE"}, op) {
				return fmt.Errorf("mutant %s: operation %q is none of CREATE, UPDATE, DELETE", m.Name, op)
			}
		}
	}
	return p.clusterTestsParams.Validate()
}

// catchLimit is how long a run with a mutant may go on: twice the
// baseline's time, and at least half a minute more than it. Tests that
// wait for what the mutant never lets happen (an Eventually of minutes)
// are stopped there: still waiting is not passing.
func catchLimit(baseline time.Duration) time.Duration {
	return max(2*baseline, baseline+30*time.Second)
}

func runClusterTestsCatch(ctx context.Context, c *Context, p *clusterCatchParams) Outcome {
	if out, ok := c.auditPreconditions(); !ok {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	s, b, out, ok := clusterBaseline(ctx, c, &p.clusterTestsParams)
	switch {
	case !ok:
		if s != nil && s.failed != nil {
			return skip("the tests do not compile, so what they catch cannot be told")
		}
		return out
	case b.stalled || !b.run.Ran() || len(b.run.Failed) > 0:
		return skip("the tests do not pass against the operator as deployed, so what they catch cannot be told")
	}
	expected := "go test " + strings.Join(p.Packages, " ") + " fails (or is still waiting after " + roundDur(catchLimit(b.took)) + ") against each mutant of the deployed operator"
	// Among the mutants' runs, in an order chosen afresh, a control: the
	// tests once more with no mutant alive, invoked as every other run.
	// Tests that fail it fail whatever the operator does (a name their
	// first run left taken; a suite that counts its runs), so their
	// failing against a mutant tells nothing about it.
	order := []int{controlRun}
	for i := range p.Mutants {
		order = append(order, i)
	}
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return judgeMutants(p.Mutants, order, expected, func(m *operatorMutant) mutantRun {
		var mr mutantRun
		mr.r, mr.fired, mr.evs, mr.undecided, mr.err = decideMutant(ctx, c, s, m, catchLimit(b.took))
		mr.excused = m != nil && !mr.r.failed() && m.excuses(mr.evs, s.user, mr.r.start)
		return mr
	})
}

// controlRun stands for the control in an order of mutant runs.
const controlRun = -1

// mutantRun is what decideMutant told of one mutant (nil: the control),
// and whether the course's own check excuses a run that passed.
type mutantRun struct {
	r         suiteRun
	fired     bool
	evs       []AuditEvent
	undecided string
	err       error
	excused   bool
}

// judgeMutants runs the mutants (and the control, controlRun) in order
// and judges the tests by what the runs told. The verdict does not depend
// on the order: a control that fails decides it whenever it runs (it is
// run at once when a mutant's runs cannot tell), and what survived is
// listed in the mutants' own order.
func judgeMutants(mutants []operatorMutant, order []int, expected string, run func(*operatorMutant) mutantRun) Outcome {
	controlDone := false
	// runControl: the control's verdict, or ok when it passed.
	runControl := func() (Outcome, bool) {
		controlDone = true
		mr := run(nil)
		switch {
		case mr.err != nil:
			return errorf("mutant control: %v", oneLine(mr.err)), false
		case mr.r.err != nil:
			return testsUnavailable(mr.r.err), false
		case mr.undecided != "":
			out := errorf("%s: whether they can tell a mutant cannot be told", mr.undecided)
			out.Observed = testsFailed(mr.r.run, "").Observed
			return out, false
		case mr.r.failed():
			out := testsFailed(mr.r.run, expected)
			out.Message = fmt.Sprintf("the tests passed against the operator as deployed, then failed when run once more with no mutant alive (%s): tests whose outcome depends on the runs before them (a fixed name that a run leaves taken: give each Database a unique name, and delete it) cannot tell a mutant",
				strings.TrimPrefix(out.Message, "the project's own tests fail: "))
			return out, false
		}
		return Outcome{}, true
	}
	survived := make([]string, len(mutants))
	excused := make([]string, len(mutants))
	caught := 0
	for _, i := range order {
		if i == controlRun {
			if controlDone {
				continue
			}
			if out, ok := runControl(); !ok {
				return out
			}
			continue
		}
		m := &mutants[i]
		mr := run(m)
		switch {
		case mr.err != nil:
			return errorf("mutant %s: %v", m.Name, oneLine(mr.err))
		case mr.r.err != nil:
			return testsUnavailable(mr.r.err)
		case mr.undecided != "":
			// Tests that failed before the operator even tried what the
			// mutant refuses may fail whatever the operator does: the
			// control, run now if it has not run yet, tells which.
			if !controlDone {
				if out, ok := runControl(); !ok {
					return out
				}
			}
			out := errorf("%s: whether they catch it cannot be told", mr.undecided)
			out.Observed = testsFailed(mr.r.run, "").Observed
			return out
		}
		failed := mr.r.failed()
		switch {
		case failed && mr.fired:
			caught++
		case mr.excused:
			excused[i] = m.Excuse.Why
		case !mr.fired:
			survived[i] = "an operator that " + m.Doc + " (the tests never made it do that)"
		default:
			survived[i] = "an operator that " + m.Doc
		}
	}
	survived = slices.DeleteFunc(survived, func(s string) bool { return s == "" })
	excused = slices.DeleteFunc(excused, func(s string) bool { return s == "" })
	if len(survived) > 0 {
		out := fail("the tests pass against %s: nothing they check notices it", strings.Join(survived, "; and against "))
		out.Expected = expected
		out.Observed = fmt.Sprintf("%d of %d mutant(s) caught", caught, len(mutants))
		return out
	}
	docs := make([]string, len(mutants))
	for i, m := range mutants {
		docs[i] = m.Doc
	}
	out := pass("the tests fail against each of %d mutant(s) of the deployed operator: one that %s", len(mutants), strings.Join(docs, "; one that "))
	if len(excused) > 0 {
		out = Outcome{Status: report.Warn, Expected: expected, Observed: fmt.Sprintf("%d of %d mutant(s) caught", caught, len(mutants)),
			Message: fmt.Sprintf("the tests catch %d of %d mutant(s) of the deployed operator; the others only through the course's own check: %s", caught, len(mutants), strings.Join(excused, "; "))}
	}
	return out
}

// raceRetries is how many more times a run that lost the tests' own race
// with the operator runs (see ownConflicts). Such a run fails within
// seconds, so retrying is cheap; on a busy machine the course's
// lifecycle spec loses it about one run in three.
const raceRetries = 5

// decideMutant runs the tests against m (nil: the control, no mutant
// alive) until a run says something about it. A run that failed on the
// tests' own lost race with the operator (a conflict right after a read)
// says nothing and runs again, up to raceRetries times. A mutant's run
// that failed or was stopped before the operator even tried what m
// refuses (a loaded machine: the Database not yet Ready when the limit
// came), or a control run stopped at the limit, says nothing either: it
// runs again with twice the time, once. Undecided says why no run told,
// when none did.
func decideMutant(ctx context.Context, c *Context, s *clusterSuite, m *operatorMutant, limit time.Duration) (r suiteRun, fired bool, evs []AuditEvent, undecided string, err error) {
	lost, widened := 0, false
	what := "with no mutant alive"
	if m != nil {
		what = "against the mutant that " + m.Doc
	}
	for {
		r, fired, evs, err = runOperatorMutant(ctx, c, s, m, limit)
		if err != nil || r.err != nil || !r.failed() {
			return r, fired, evs, "", err
		}
		r.conflicts = ownConflicts(evs, s.user, r.start)
		switch {
		case r.lostRace():
			if lost == raceRetries {
				return r, fired, evs, fmt.Sprintf("the tests failed %s in %[3]d runs, each time on their own write refused with a conflict (409): %[2]s", what, strings.Join(r.conflicts, "; "), lost+1), nil
			}
			lost++
		case fired || m == nil && !r.stalled:
			return r, fired, evs, "", nil
		case widened && m == nil:
			return r, fired, evs, fmt.Sprintf("the tests were still running %s after %s, twice", what, roundDur(limit)), nil
		case widened:
			return r, fired, evs, fmt.Sprintf("the tests failed %s before the operator even tried what it refuses, twice (the second time with %s)", what, roundDur(limit)), nil
		default:
			limit, widened = 2*limit, true
		}
	}
}

// runOperatorMutant makes m alive (nil: none), runs the tests within
// limit, and takes m away; fired says the operator did try what m
// refused.
func runOperatorMutant(ctx context.Context, c *Context, s *clusterSuite, m *operatorMutant, limit time.Duration) (r suiteRun, fired bool, evs []AuditEvent, err error) {
	var pol *mutantPolicy
	if m != nil {
		if pol, err = installMutantPolicy(ctx, c, *m); err != nil {
			return suiteRun{}, false, nil, err
		}
	}
	r = s.run(ctx, c, limit)
	// Taken away even when the run's context ended (Ctrl-C): a policy
	// left behind would refuse the operator's writes for good.
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if pol != nil {
		if err := pol.remove(rmCtx, c); err != nil {
			return r, false, nil, err
		}
	}
	evs, err = c.syncAudit(ctx)
	if err != nil {
		return r, false, nil, err
	}
	// What a stopped run left behind would keep the operator busy
	// through the next one.
	s.removeLeftovers(rmCtx, c, evs, r.start)
	fired = pol != nil && slices.ContainsFunc(evs, func(ev AuditEvent) bool {
		return ev.By(c.Operator().Identity) && !ev.RequestReceivedTimestamp.Before(r.start) && ev.Code() == 403 &&
			ev.ResponseStatus != nil && strings.Contains(ev.ResponseStatus.Message, pol.name)
	})
	return r, fired, evs, nil
}
