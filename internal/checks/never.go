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
		Name:       "never",
		Doc:        "no recorded state of an object (since a mark) satisfied all of the given assertions at once (an invariant: Ready is never True outside phase Ready)",
		Namespaced: true,
	}, runNever))
}

// neverParams is an invariant over an object's recorded history: the
// state the assertions describe together must never have been written.
// A poll would miss a state that lasts one write; the recording does not.
type neverParams struct {
	Ref   labs.Ref         `json:"ref"`
	State []labs.Assertion `json:"state"`
	// Since names a step's mark: only states observed from then on count.
	Since string `json:"since,omitempty"`
}

func (p *neverParams) Validate() error {
	if p.Ref.IsZero() || len(p.State) == 0 {
		return errors.New("needs ref and state")
	}
	return nil
}

func runNever(ctx context.Context, c *Context, p *neverParams) Outcome {
	states, err := c.HistorySince(ctx, p.Ref, p.Since)
	if err != nil {
		return errorf("%v", err)
	}
	return matchNever(p.Ref, states, p.State)
}

// matchNever fails at the first observed state that satisfies every
// assertion of state.
func matchNever(ref labs.Ref, states []Observed, state []labs.Assertion) Outcome {
	desc := DescribeAssertions(state)
	seen, n := []string{}, 0
	for _, o := range states {
		if o.Object == nil {
			continue
		}
		n++
		if d := describeState(o); len(seen) == 0 || seen[len(seen)-1] != d {
			seen = append(seen, d)
		}
		if ok, _ := EvalAssertions(o.Object, state); ok {
			return Outcome{Status: report.Fail, Related: []string{ref.Name}, Object: o.Object,
				Message:  fmt.Sprintf("%s was written with %s", ref, desc),
				Expected: "never " + desc,
				Observed: "states seen: " + strings.Join(seen, " → ")}
		}
	}
	if n == 0 {
		return errorf("no state of %s was recorded", ref)
	}
	return pass("none of the %d recorded states of %s had %s", n, ref, desc)
}
