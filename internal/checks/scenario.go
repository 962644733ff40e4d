package checks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// scenario is the state of one scenario while it runs.
type scenario struct {
	r  *run
	sc *labs.Scenario

	mu        sync.Mutex
	marks     map[string]time.Time
	deleted   map[string]types.UID
	recorders map[string]*recorder
	premises  map[string]*premise
}

func (r *run) runScenario(ctx context.Context, sc *labs.Scenario, collect func(*report.CheckResult)) {
	s := &scenario{r: r, sc: sc, marks: map[string]time.Time{}, deleted: map[string]types.UID{}, recorders: map[string]*recorder{}, premises: map[string]*premise{}}
	rctx, stopRecording := context.WithCancel(ctx)
	defer stopRecording()
	// blocked says why the rest of the scenario cannot run; a failed gate
	// makes it a skip (gateFailed), an action that failed an error.
	var blocked string
	gateFailed := "" // the ID of the failed gate, if that is what blocks
	// setUp is the evidence of a wait that timed out: the next assertion,
	// which that wait set up, fails with it (the defect is charged once,
	// there); the ones after it are not run.
	var setUp string
	// notes go with the next assertion (a wait that never got quiet).
	var notes []string
	// excused: a course bug's signature (labs.Stuck) was seen; what fails
	// after it in this scenario is a warning.
	var excused string
	for _, ref := range sc.Record {
		rec, err := s.record(rctx, ref)
		if err != nil {
			blocked = fmt.Sprintf("cannot watch %s: %v", ref, oneLine(err))
			break
		}
		s.recorders[ref.String()] = rec
	}
	for i := 0; i < len(sc.Steps); i++ {
		step := &sc.Steps[i]
		if step.Mark != "" {
			s.mu.Lock()
			s.marks[step.Mark] = time.Now()
			s.mu.Unlock()
		}
		if !step.IsAssertion() {
			if blocked != "" {
				continue
			}
			err := s.act(ctx, step)
			switch {
			case err == nil:
			case errors.As(err, new(*neverQuiet)):
				// Not quiet is no failure (the operator-health checks judge
				// a busy operator), but the next assertion says it ran
				// while the operator was still reacting.
				notes = append(notes, fmt.Sprintf("step %d (%s): %s", i+1, describeAction(step), oneLine(err)))
			case step.Wait != nil && step.Wait.OnTimeout == "continue" && isTimeout(err) && ctx.Err() == nil:
				notes = append(notes, fmt.Sprintf("step %d (%s) %s; the steps after it do not need it, so they ran", i+1, describeAction(step), oneLine(err)))
			case step.Wait != nil && isTimeout(err) && ctx.Err() == nil:
				setUp = fmt.Sprintf("step %d (%s) %s", i+1, describeAction(step), oneLine(err))
				blocked = setUp
			default:
				blocked = fmt.Sprintf("step %d (%s) failed: %s", i+1, describeAction(step), oneLine(err))
			}
			continue
		}
		// The assertion and those that run meanwhile start together.
		group := []*labs.Step{step}
		for i+1 < len(sc.Steps) && sc.Steps[i+1].Meanwhile {
			i++
			group = append(group, &sc.Steps[i])
		}
		start := time.Now()
		outs := make([]Outcome, len(group))
		ends := make([]time.Time, len(group))
		behindGate := make([]bool, len(group))
		var wg sync.WaitGroup
		for g, st := range group {
			if setUp != "" {
				outs[g], ends[g] = Outcome{Status: report.Fail, Message: "could not be set up: " + setUp}, time.Now()
				setUp = ""
				continue
			}
			if blocked != "" {
				outs[g], ends[g] = blockedOutcome(blocked, gateFailed), time.Now()
				behindGate[g] = gateFailed != ""
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[g] = s.assert(ctx, st)
				ends[g] = time.Now()
			}()
		}
		wg.Wait()
		s.judgePremises(ctx, outs)
		if len(notes) > 0 {
			outs[0].Notes = append(notes, outs[0].Notes...)
			notes = nil
		}
		excused = excuse(outs, excused)
		for g, st := range group {
			c := r.toCheck(ctx, st, outs[g])
			c.Scenario = sc.Name
			if behindGate[g] {
				c.BlockedBy = gateFailed
			}
			c.Duration = report.Duration(ends[g].Sub(start))
			if st.Gate && !c.Status.Passed() && c.Status != report.Skipped && blocked == "" {
				blocked, gateFailed = gateBlock(st, r.o.Lang), st.ID
			}
			collect(c)
		}
	}
}

// gateBlock says which gate stopped the steps after it: its task(s) and
// title, so a student sees what to fix first.
func gateBlock(gate *labs.Step, lang string) string {
	return fmt.Sprintf("gate %s %q failed", strings.Join(gate.Tasks, ","), gate.Title.In(lang))
}

// blockedOutcome is the result of an assertion that did not run. Behind a
// failed gate it is a skip: it could not run, so it is not charged as an
// error (the gate's own failure is charged to the gate's task, once), and
// its task is not judged (report.TaskStatus). Behind an action that failed
// it is an error: nothing else explains the failure.
func blockedOutcome(blocked, gateFailed string) Outcome {
	if gateFailed != "" {
		return Outcome{Status: report.Skipped, Message: notRun + blocked}
	}
	return Outcome{Status: report.Error, Message: notRun + blocked}
}

// excuse turns the group's failures into warnings once a course bug's
// signature was seen (excused), and returns the excuse for the steps after
// the group: the first one seen.
func excuse(outs []Outcome, excused string) string {
	for g := range outs {
		if excused != "" && (outs[g].Status == report.Fail || outs[g].Status == report.Error) {
			outs[g].Status = report.Warn
			outs[g].Notes = append(outs[g].Notes, "reported as a warning: "+excused)
		}
	}
	for g := range outs {
		if outs[g].Excuse != "" && excused == "" {
			excused = outs[g].Excuse
		}
	}
	return excused
}

// act runs an action step.
func (s *scenario) act(ctx context.Context, step *labs.Step) error {
	r := s.r
	switch {
	case step.Apply != nil:
		obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(step.Apply.Object)}
		obj.SetNamespace(r.ns)
		gvk := obj.GroupVersionKind()
		m, err := r.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("the cluster does not serve %s: %w", gvk.GroupKind(), err)
		}
		data, err := json.Marshal(obj.Object)
		if err != nil {
			return err
		}
		r.remember(objectKey{GVR: m.Resource, GVK: gvk, Name: obj.GetName()})
		_, err = r.dyn.Resource(m.Resource).Namespace(r.ns).Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: FieldManager, Force: ptrTo(true)})
		return err
	case step.Patch != nil:
		gvk, gvr, _, err := r.gvr(step.Patch.Ref.Kind)
		if err != nil {
			return err
		}
		if holdFinalizers(step.Patch.Merge) {
			r.rememberHeld(objectKey{GVR: gvr, GVK: gvk, Name: step.Patch.Ref.Name})
		}
		data, err := json.Marshal(step.Patch.Merge)
		if err != nil {
			return err
		}
		var sub []string
		if step.Patch.Subresource != "" {
			sub = []string{step.Patch.Subresource}
		}
		stored, err := r.dyn.Resource(gvr).Namespace(r.ns).Patch(ctx, step.Patch.Ref.Name, types.MergePatchType, data,
			metav1.PatchOptions{FieldManager: FieldManager}, sub...)
		if err == nil && step.Patch.Subresource == "status" {
			s.rememberPremise(step.Patch.Ref, gvr, step.Patch.Merge, stored)
		}
		return err
	case step.Wait != nil:
		_, gvr, _, err := r.gvr(step.Wait.Ref.Kind)
		if err != nil {
			return err
		}
		if q := step.Wait.Quiet; q != nil {
			return r.settle(ctx, gvr, step.Wait.Ref.Name, r.stretched(q.For(r.profile)), r.timeout(step))
		}
		var observed string
		last, err := r.waitFollowing(ctx, gvr, step.Wait.Ref.Name, r.timeout(step), step.Wait.Progress, 0, func(u *unstructured.Unstructured) (bool, error) {
			ok, obs := EvalAssertions(u, step.Wait.Eventually)
			observed = obs
			return ok, nil
		})
		if isTimeout(err) && ctx.Err() == nil {
			if last == nil {
				observed = step.Wait.Ref.String() + " does not exist"
			}
			return fmt.Errorf("%w waiting for %s; last seen: %s", err, DescribeAssertions(step.Wait.Eventually), observed)
		}
		return err
	case step.Delete != nil:
		if step.Delete.All != "" {
			_, gvr, _, err := r.gvr(step.Delete.All)
			if err != nil {
				return err
			}
			list, err := r.dyn.Resource(gvr).Namespace(r.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			s.forgetPremises(gvr, "")
			for _, item := range list.Items {
				s.setDeleted(labs.Ref{Kind: step.Delete.All, Name: item.GetName()}, item.GetUID())
				r.deletingOurselves(item.GetUID())
				err := r.dyn.Resource(gvr).Namespace(r.ns).Delete(ctx, item.GetName(), metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)})
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		}
		ref := step.Delete.Ref
		_, gvr, _, err := r.gvr(ref.Kind)
		if err != nil {
			return err
		}
		res := r.dyn.Resource(gvr).Namespace(r.ns)
		obj, err := res.Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s does not exist, so it cannot be deleted", ref)
		}
		if err != nil {
			return err
		}
		s.setDeleted(ref, obj.GetUID())
		r.deletingOurselves(obj.GetUID())
		s.forgetPremises(gvr, ref.Name)
		return res.Delete(ctx, ref.Name, metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: ptrTo(obj.GetUID())},
			PropagationPolicy: ptrTo(metav1.DeletePropagationBackground),
		})
	}
	return fmt.Errorf("unknown action %q", step.Kind())
}

func describeAction(step *labs.Step) string {
	switch {
	case step.Apply != nil:
		u := unstructured.Unstructured{Object: step.Apply.Object}
		return fmt.Sprintf("apply %s %s", u.GetKind(), u.GetName())
	case step.Patch != nil:
		return "patch " + step.Patch.Ref.String()
	case step.Wait != nil:
		return "wait for " + step.Wait.Ref.String()
	case step.Delete != nil:
		if step.Delete.All != "" {
			return "delete " + step.Delete.All + " --all"
		}
		return "delete " + step.Delete.Ref.String()
	}
	return step.Kind()
}

func (s *scenario) setDeleted(ref labs.Ref, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted[ref.String()] = uid
}

func (s *scenario) deletedUID(ref labs.Ref) (types.UID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, ok := s.deleted[ref.String()]
	return uid, ok
}

// assert runs an assertion step.
func (s *scenario) assert(ctx context.Context, step *labs.Step) Outcome {
	timeout := s.r.timeout(step)
	if step.Expect != nil {
		return s.expect(ctx, step.Expect, timeout)
	}
	def, ok := registry[step.Check.Name]
	if !ok {
		return Outcome{Status: report.Error, Message: "unknown check " + step.Check.Name}
	}
	params, err := decodeParams(def, step.Check.With)
	if err != nil {
		return Outcome{Status: report.Error, Message: err.Error()}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout+5*time.Second) // a check bounds its own waits by Timeout
	defer cancel()
	return def.Run(cctx, &Context{run: s.r, scn: s, Step: step, Timeout: timeout}, params)
}

func (r *run) timeout(step *labs.Step) time.Duration {
	if step.Timeout != nil && !step.Timeout.IsZero() {
		return r.stretched(step.Timeout.For(r.profile))
	}
	return r.stretched(r.lab.Defaults.Timeout.For(r.profile))
}
