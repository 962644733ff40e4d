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
		Name:       "sequence",
		Doc:        "a recorded object passed through the given states in this order (others may come between, as fast as they like)",
		Namespaced: true,
	}, runSequence))
}

type sequenceParams struct {
	Ref labs.Ref `json:"ref"`
	// States are the states to see, in order; each is a list of assertions.
	States [][]labs.Assertion `json:"states"`
	// Since names a step's mark: only states observed from then on count.
	Since string `json:"since,omitempty"`
}

func (p *sequenceParams) Validate() error {
	if p.Ref.IsZero() || len(p.States) < 2 {
		return errors.New("needs ref and at least two states")
	}
	for i, s := range p.States {
		if len(s) == 0 {
			return fmt.Errorf("state %d has no assertions", i+1)
		}
	}
	return nil
}

func runSequence(ctx context.Context, c *Context, p *sequenceParams) Outcome {
	states, err := c.HistorySince(ctx, p.Ref, p.Since)
	if err != nil {
		return errorf("%v", err)
	}
	return matchSequence(p.Ref, states, p.States)
}

// matchSequence finds the wanted states as a subsequence of the observed
// ones: each wanted state in a state observed after the previous one's.
func matchSequence(ref labs.Ref, states []Observed, want [][]labs.Assertion) Outcome {
	descs := make([]string, len(want))
	for i, w := range want {
		descs[i] = DescribeAssertions(w)
	}
	out := Outcome{Related: []string{ref.Name}, Expected: fmt.Sprintf("%s passing through, in order: %s", ref, strings.Join(descs, " → "))}
	next := 0
	var seen []string
	for _, o := range states {
		if o.Object == nil {
			continue
		}
		if d := describeState(o); len(seen) == 0 || seen[len(seen)-1] != d {
			seen = append(seen, d)
		}
		if next < len(want) {
			if ok, _ := EvalAssertions(o.Object, want[next]); ok {
				next++
			}
		}
	}
	if next == len(want) {
		out.Status = report.Pass
		out.Message = fmt.Sprintf("%s passed through %s", ref, strings.Join(descs, " → "))
		return out
	}
	out.Status = report.Fail
	if next == 0 {
		out.Message = fmt.Sprintf("%s was never observed with %s", ref, descs[0])
	} else {
		out.Message = fmt.Sprintf("%s reached %s but was never observed with %s after it", ref, descs[next-1], descs[next])
	}
	out.Observed = "states seen: " + strings.Join(seen, " → ")
	if len(seen) == 0 {
		out.Observed = "no state of " + ref.String() + " was seen"
	}
	if len(states) > 0 {
		out.Object = states[len(states)-1].Object
	}
	return out
}
