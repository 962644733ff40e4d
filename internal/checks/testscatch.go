package checks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/testmutant"
)

func init() {
	Register(Typed(Definition{
		Name: "tests-catch",
		Doc:  "the project's own tests fail on mutants of its controller (the Secret never created, the finalizer never added, ...): tests that pass whatever the controller does test nothing",
	}, runTestsCatch))
}

type testsCatchParams struct {
	// goTestParams: the packages, the controller and the reconciler.
	goTestParams
	// Mutants must each make a test fail (testmutant.Catalogue).
	Mutants []string `json:"mutants"`
}

func (p *testsCatchParams) Validate() error {
	if len(p.Mutants) == 0 {
		return errors.New("needs mutants")
	}
	for _, m := range p.Mutants {
		if _, ok := testmutant.Lookup(m); !ok {
			return fmt.Errorf("unknown mutant %q", m)
		}
	}
	return nil
}

// errNoAssets: labctl's kube-apiserver and etcd are not installed.

func runTestsCatch(ctx context.Context, c *Context, p *testsCatchParams) Outcome {
	dir := c.ProjectDir()
	if dir == "" {
		return skip("no project directory whose tests could run (pass --project DIR)")
	}
	// The step's timeout bounds every run it makes together.
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	rel, reconciler := p.target()
	pkgs := p.packages()
	build := buildMutants(ctx, c, pkgs, rel, reconciler)
	switch {
	case build.skip != "":
		return skip("%s", build.skip)
	case build.err != nil:
		return testsUnavailable(build.err)
	case build.failed != nil:
		// labctl's wrappers did not fit the project (a Create of some
		// other type), or the tests do not compile at all (go-test says
		// so): nothing this step can judge.
		return skip("the tests do not compile with labctl's mutants of %s (%s), so whether they catch them cannot be told", rel, gobuild.FirstErrors(build.failed.BuildOutput, 1))
	case len(build.bins) == 0:
		return skip("go test %s has no package with tests", strings.Join(pkgs, " "))
	}
	var mutants []testmutant.Mutant
	for _, name := range p.Mutants {
		m, _ := testmutant.Lookup(name)
		if m.NeedsReconcile && !build.in.Reconcile {
			return skip("labctl found no Reconcile method of %s in %s, so it cannot make the mutant that %s", reconciler, rel, m.Doc)
		}
		mutants = append(mutants, m)
	}
	expected := "go test " + strings.Join(pkgs, " ") + " fails on each mutant, in a test that passes on the project's own controller"
	// What fails on the student's own controller says nothing about a
	// mutant (the course's scaffold test, a flaky spec): a mutant is caught
	// by a test that passed at baseline and fails with it. When the go-test
	// step already ran these tests and all passed, that is the baseline;
	// otherwise the instrumented build runs with no mutant alive (go-test
	// may have run it already).
	var baseFailed []string
	v, ok := c.run.recall("go-test " + dir + " " + strings.Join(pkgs, " "))
	failFast := ok && v.(baselineRun).clean()
	if !failFast {
		base := build.baseline(ctx, c)
		switch {
		case base.err != nil:
			return testsUnavailable(base.err)
		case len(base.run.Passed) == 0:
			return skip("no test of go test %s passes on the project's own controller, so whether they catch a mutant cannot be told", strings.Join(pkgs, " "))
		}
		baseFailed = failedNames(base.run)
	}
	// Beside the mutants, in an order chosen afresh, a control: the same
	// build with no mutant alive. A test that fails in it fails whatever
	// the controller does (it changes from run to run, or it looks at its
	// run rather than at the controller), so its failing tells no mutant
	// apart: it is left out of what catches one, and the step is judged on
	// the tests that held. It is invoked as the mutants' runs are (with
	// fail-fast when they have it): a suite that could tell it from them
	// by its own command line could fail only theirs. One control serves
	// every step of a verification that tests the same build: the first
	// such step runs it among its mutants, the others read it (a run is
	// the costly part of the lab). Two runs at a time: a run is mostly one process (envtest's
	// kube-apiserver, then the suite) and the machine has two cores.
	const control = ""
	shared, ours := c.run.control("tests-catch control " + build.key)
	batch := slices.Clone(p.Mutants)
	if ours {
		defer shared.settle()
		batch = append(batch, control)
	} else if _, ok := shared.wait(); !ok {
		// The step that ran it could not: this one runs its own.
		batch = append(batch, control)
	}
	rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	runs := map[string]baselineRun{}
	var mu sync.Mutex
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, name := range batch {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			run, err := build.run(ctx, c, name, failFast)
			mu.Lock()
			runs[name] = baselineRun{run, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	// A run that ran no test at all (its suite could not set up: envtest
	// slow to start on a loaded machine) says nothing of its mutant: it
	// runs once more, alone.
	for _, name := range batch {
		if r := runs[name]; r.err == nil && !r.run.Ran() {
			run, err := build.run(ctx, c, name, failFast)
			runs[name] = baselineRun{run, err}
		}
	}
	ctl, ran := runs[control]
	if !ran {
		ctl, _ = shared.wait()
	} else if ours && ctl.err == nil && ctl.run.Ran() {
		shared.keep(ctl)
	}
	if ctl.err != nil {
		return testsUnavailable(ctl.err)
	}
	unsteady := slices.DeleteFunc(slices.Clone(failedNames(ctl.run)), func(n string) bool { return slices.Contains(baseFailed, n) })
	// held: the tests a mutant failed that passed both at baseline and in
	// the control.
	held := func(run *gobuild.TestRun) []string {
		return slices.DeleteFunc(slices.Clone(failedNames(run)), func(n string) bool {
			return slices.Contains(baseFailed, n) || slices.Contains(unsteady, n)
		})
	}
	// survived: mutants no test noticed; masked: mutants only unsteady
	// tests failed with.
	var survived, masked []string
	caught := 0
	for _, m := range mutants {
		r := runs[m.Name]
		if r.err == nil && failFast && len(unsteady) > 0 && len(held(r.run)) == 0 && len(failedNames(r.run)) > 0 {
			// It stopped at a test the control failed too: what the
			// tests after it say about the mutant is still unknown.
			run, err := build.run(ctx, c, m.Name, false)
			r = baselineRun{run, err}
		}
		if r.err != nil {
			return testsUnavailable(r.err)
		}
		// Caught: a test that held fails, and the mutant did change what
		// the controller did.
		if len(held(r.run)) > 0 && fired(r.run, m.Name) {
			caught++
			continue
		}
		if !r.run.Ran() {
			return skip("go test %s runs no test with labctl's mutant %s", strings.Join(pkgs, " "), m.Name)
		}
		s := "a controller that " + m.Doc
		switch {
		case !fired(r.run, m.Name):
			s += " (the tests never made it do that)"
		case len(failedNames(r.run)) > len(baseFailedIn(r.run, baseFailed)):
			masked = append(masked, s)
			continue
		}
		survived = append(survived, s)
	}
	if len(survived)+len(masked) > 0 {
		var why []string
		if len(survived) > 0 {
			why = append(why, fmt.Sprintf("the tests pass on %s: nothing they check notices it", strings.Join(survived, "; and on ")))
		}
		if len(masked) > 0 {
			why = append(why, fmt.Sprintf("what fails with %s fails without a mutant too when run again beside its mutants (%s): a test whose outcome changes from run to run cannot tell a mutant", strings.Join(masked, "; or with "), logline.Cut(strings.Join(unsteady, "; "), 300)))
		}
		out := fail("%s", strings.Join(why, "; "))
		out.Expected = expected
		out.Observed = fmt.Sprintf("%d of %d mutant(s) caught", caught, len(mutants))
		if len(unsteady) > 0 {
			out.Observed += "; a run with no mutant alive failed what the baseline passed"
		}
		return out
	}
	return pass("the tests fail on each of %d mutant(s) of the controller: %s", len(mutants), mutantDocs(mutants))
}

// baselineRun is one go test run, or why it could not happen.
type baselineRun struct {
	run *gobuild.TestRun
	err error
}

// clean: the tests ran and every one passed.
func (b baselineRun) clean() bool {
	return b.err == nil && len(b.run.BuildFailed) == 0 && len(b.run.Failed) == 0 && b.run.Ran()
}

// baseFailedIn are the tests run failed that failed at baseline too.
func baseFailedIn(run *gobuild.TestRun, baseFailed []string) []string {
	return slices.DeleteFunc(slices.Clone(failedNames(run)), func(n string) bool { return !slices.Contains(baseFailed, n) })
}

// failedNames are the Ginkgo specs that failed, or else the Go tests.
func failedNames(run *gobuild.TestRun) []string {
	if len(run.FailedSpecs) > 0 {
		return run.FailedSpecs
	}
	return run.Failed
}

func fired(run *gobuild.TestRun, mutant string) bool {
	for _, l := range run.Lines {
		if strings.Contains(l, testmutant.FiredPrefix+mutant) {
			return true
		}
	}
	return false
}

func mutantDocs(ms []testmutant.Mutant) string {
	docs := make([]string, len(ms))
	for i, m := range ms {
		docs[i] = m.Doc
	}
	return strings.Join(docs, "; ")
}
