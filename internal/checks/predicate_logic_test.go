package checks

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/labctl/labctl/internal/report"
)

// The StatefulSet predicate is judged by its logic, however written: only
// a predicate that drops a change of Generation or ReadyReplicas, or lets
// status churn through, fails.
func TestOwnsPredicateJudgesLogic(t *testing.T) {
	const inline = `predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				oldSS := e.ObjectOld.(*appsv1.StatefulSet)
				newSS := e.ObjectNew.(*appsv1.StatefulSet)
				return oldSS.Generation != newSS.Generation ||
					oldSS.Status.ReadyReplicas != newSS.Status.ReadyReplicas
			},
		}`
	with := func(pred, extra string) string {
		code := strings.Replace(watchSetup, inline, pred, 1)
		if code == watchSetup && pred != inline {
			t.Fatal("the fixture changed: the inline predicate is not found")
		}
		return code + extra
	}
	const readyFuncs = `predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.(*appsv1.StatefulSet).Status.ReadyReplicas != e.ObjectNew.(*appsv1.StatefulSet).Status.ReadyReplicas
		}}`
	passes := map[string]string{
		"GenerationChangedPredicate or a ready-replicas Funcs": with("predicate.Or(predicate.GenerationChangedPredicate{}, "+readyFuncs+")", ""),
		"a custom type and a helper": with("stsChanged{}", `
type stsChanged struct{ predicate.Funcs }

func (stsChanged) Update(e event.UpdateEvent) bool {
	if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
		return true
	}
	return readyChanged(e.ObjectOld, e.ObjectNew)
}

func readyChanged(a, b client.Object) bool {
	return a.(*appsv1.StatefulSet).Status.ReadyReplicas != b.(*appsv1.StatefulSet).Status.ReadyReplicas
}
`),
		"the negation, with ok checks": with(`predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok := e.ObjectOld.(*appsv1.StatefulSet)
			if !ok {
				return false
			}
			n, ok := e.ObjectNew.(*appsv1.StatefulSet)
			if !ok {
				return false
			}
			if o.Generation == n.Generation && o.Status.ReadyReplicas == n.Status.ReadyReplicas {
				return false
			}
			return true
		}}`, ""),
		"named booleans and a method value": with(`predicate.Funcs{UpdateFunc: r.stsUpdate}`, `
func (r *DatabaseReconciler) stsUpdate(e event.UpdateEvent) bool {
	oldGen, newGen := e.ObjectOld.GetGeneration(), e.ObjectNew.GetGeneration()
	specChanged := oldGen != newGen
	readyChanged := e.ObjectOld.(*appsv1.StatefulSet).Status.ReadyReplicas != e.ObjectNew.(*appsv1.StatefulSet).Status.ReadyReplicas
	return specChanged || readyChanged
}
`),
		"a switch with a default in the middle": with(`predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*appsv1.StatefulSet), e.ObjectNew.(*appsv1.StatefulSet)
			switch {
			case o.Generation != n.Generation:
				return true
			default:
				return false
			case o.Status.ReadyReplicas != n.Status.ReadyReplicas:
				return true
			}
		}}`, ""),
		"a switch with two expressions in a case": with(`predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*appsv1.StatefulSet), e.ObjectNew.(*appsv1.StatefulSet)
			switch {
			case o.Generation != n.Generation, o.Status.ReadyReplicas != n.Status.ReadyReplicas:
				return true
			}
			return false
		}}`, ""),
		"a switch that sets a boolean, with a tag": with(`predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			changed := false
			switch n := e.ObjectNew.(*appsv1.StatefulSet); n.Generation {
			case e.ObjectOld.GetGeneration():
				changed = e.ObjectOld.(*appsv1.StatefulSet).Status.ReadyReplicas != n.Status.ReadyReplicas
			default:
				changed = true
			}
			return changed
		}}`, ""),
	}
	for name, code := range passes {
		t.Run(name, func(t *testing.T) {
			out := runCheck(t, writeProject(t, code), "owns-predicate", stsPredicate)
			assert.Equal(t, report.Pass, out.Status, out.Message)
			assert.Empty(t, out.Notes)
		})
	}
	t.Run("a local variable", func(t *testing.T) {
		code := strings.Replace(watchSetup, inline, "stsPred", 1)
		code = strings.Replace(code, "\treturn ctrl.NewControllerManagedBy", "\tstsPred := "+inline+"\n\treturn ctrl.NewControllerManagedBy", 1)
		out := runCheck(t, writeProject(t, code), "owns-predicate", stsPredicate)
		assert.Equal(t, report.Pass, out.Status, out.Message)
	})

	fails := map[string]struct{ code, says string }{
		"And instead of Or":                               {with("predicate.And(predicate.GenerationChangedPredicate{}, "+readyFuncs+")", ""), "drops an update that changes Generation"},
		"&& instead of ||":                                {strings.Replace(watchSetup, "newSS.Generation ||", "newSS.Generation &&", 1), "drops an update that changes"},
		"== instead of !=":                                {strings.Replace(watchSetup, "oldSS.Generation != newSS.Generation", "oldSS.Generation == newSS.Generation", 1), "drops an update that changes Generation"},
		"old compared with old":                           {strings.Replace(watchSetup, "oldSS.Generation != newSS.Generation", "oldSS.Generation != oldSS.Generation", 1), "drops an update that changes Generation"},
		"spec.replicas for the generation":                {strings.Replace(watchSetup, "oldSS.Generation != newSS.Generation", "*oldSS.Spec.Replicas != *newSS.Spec.Replicas", 1), "drops an update that changes Generation"},
		"NewPredicateFuncs sees one object":               {with("predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetGeneration() > 0 && o.(*appsv1.StatefulSet).Status.ReadyReplicas > 0 })", ""), "drops an update that changes"},
		"ResourceVersionChangedPredicate filters nothing": {with("predicate.ResourceVersionChangedPredicate{}", ""), "filters nothing"},
		"GenerationChangedPredicate alone":                {with("predicate.GenerationChangedPredicate{}", ""), "drops an update that changes ReadyReplicas"},
		"a switch whose ready case returns false": {with(`predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*appsv1.StatefulSet), e.ObjectNew.(*appsv1.StatefulSet)
			switch {
			case o.Generation != n.Generation:
				return true
			case o.Status.ReadyReplicas != n.Status.ReadyReplicas:
				return false
			}
			return false
		}}`, ""), "drops an update that changes ReadyReplicas"},
		"a switch whose same-generation case returns false before the ready case": {with(`predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*appsv1.StatefulSet), e.ObjectNew.(*appsv1.StatefulSet)
			switch {
			case o.Generation != n.Generation:
				return true
			case o.Generation == n.Generation:
				return false
			case o.Status.ReadyReplicas != n.Status.ReadyReplicas:
				return true
			}
			return false
		}}`, ""), "drops an update that changes ReadyReplicas"},
		"a tagged switch that only knows a changed generation": {with(`predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			changed := true
			switch n := e.ObjectNew.(*appsv1.StatefulSet); n.Generation {
			case e.ObjectOld.GetGeneration():
				changed = false
			}
			return changed
		}}`, ""), "drops an update that changes ReadyReplicas"},
		"a switch that lets every update through": {with(`predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*appsv1.StatefulSet), e.ObjectNew.(*appsv1.StatefulSet)
			switch {
			case o.Generation != n.Generation:
				return true
			case o.Status.ReadyReplicas != n.Status.ReadyReplicas:
				return true
			default:
				return true
			}
		}}`, ""), "filters nothing"},
	}
	for name, tc := range fails {
		t.Run(name, func(t *testing.T) {
			out := runCheck(t, writeProject(t, tc.code), "owns-predicate", stsPredicate)
			assert.Equal(t, report.Fail, out.Status, out.Message)
			assert.Contains(t, out.Message, tc.says)
		})
	}
	t.Run("logic labctl cannot follow is judged by the fields it reads", func(t *testing.T) {
		code := with(`predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*appsv1.StatefulSet), e.ObjectNew.(*appsv1.StatefulSet)
			for _, changed := range []bool{o.Generation != n.Generation, o.Status.ReadyReplicas != n.Status.ReadyReplicas} {
				if changed {
					return true
				}
			}
			return false
		}}`, "")
		out := runCheck(t, writeProject(t, code), "owns-predicate", stsPredicate)
		assert.Equal(t, report.Pass, out.Status, out.Message)
		assert.Contains(t, strings.Join(out.Notes, "\n"), "could not follow")
	})
	t.Run("a predicate labctl cannot follow is judged by what it reads", func(t *testing.T) {
		code := with("other.StatefulSetChanged(\"Generation\", \"ReadyReplicas\")", "")
		out := runCheck(t, writeProject(t, code), "owns-predicate", stsPredicate)
		assert.Equal(t, report.Fail, out.Status, out.Message) // reads neither field itself
	})
}
