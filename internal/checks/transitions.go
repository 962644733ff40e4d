package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name:       "transition-times",
		Doc:        "in every recorded state of an object, each given condition's lastTransitionTime moved only when its status changed (meta.SetStatusCondition keeps it; a condition rebuilt with metav1.Now() on every pass moves it)",
		Namespaced: true,
	}, runTransitionTimes))
}

// transitionParams name the object and its condition types to judge.
type transitionParams struct {
	Ref        labs.Ref `json:"ref"`
	Conditions []string `json:"conditions"`
}

func (p *transitionParams) Validate() error {
	if p.Ref.IsZero() || len(p.Conditions) == 0 {
		return errors.New("needs ref and conditions")
	}
	return nil
}

func runTransitionTimes(ctx context.Context, c *Context, p *transitionParams) Outcome {
	states, err := c.History(ctx, p.Ref)
	if err != nil {
		return errorf("%v", err)
	}
	return matchTransitionTimes(p.Ref, states, p.Conditions)
}

// matchTransitionTimes fails at the first recorded state in which a
// condition kept its status but not its lastTransitionTime. Only that
// direction is judged: lastTransitionTime has a resolution of a second,
// so a real transition within the same second keeps it, rightly.
func matchTransitionTimes(ref labs.Ref, states []Observed, types []string) Outcome {
	type seen struct{ status, since string }
	last := map[string]seen{}
	transitions, compared := 0, 0
	for _, o := range states {
		if o.Object == nil {
			clear(last) // deleted and made again: a new life
			continue
		}
		for _, t := range types {
			cond, ok := findCondition(o.Object.Object, t)
			if !ok {
				delete(last, t)
				continue
			}
			status, _ := cond["status"].(string)
			since, _ := cond["lastTransitionTime"].(string)
			prev, had := last[t]
			last[t] = seen{status, since}
			if !had {
				continue
			}
			compared++
			if prev.status != status {
				transitions++
				continue
			}
			if prev.since != since {
				return Outcome{Status: report.Fail, Related: []string{ref.Name}, Object: o.Object,
					Message:  fmt.Sprintf("%s's %s condition stayed %s, yet its lastTransitionTime moved from %s to %s", ref, t, status, prev.since, since),
					Expected: "lastTransitionTime changes only when the condition's status does (meta.SetStatusCondition keeps it otherwise)",
					Observed: fmt.Sprintf("%s=%s since %s, then %s=%s since %s", t, prev.status, prev.since, t, status, since)}
			}
		}
	}
	if compared == 0 {
		return errorf("no two recorded states of %s had its %s conditions", ref, strings.Join(types, ", "))
	}
	return pass("over %d recorded states of %s, the %s conditions' lastTransitionTime moved only with their status (%d transitions)", len(states), ref, strings.Join(types, " and "), transitions)
}
