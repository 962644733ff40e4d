package checks

import (
	"fmt"
	"time"
)

// sinceMark keeps the recorded states observed at or after a scenario mark
// (all of them when mark is ""): "during the scale" means the states after
// the step that started it, not the ones the object passed through before.
func sinceMark(c *Context, states []Observed, mark string) ([]Observed, error) {
	if mark == "" {
		return states, nil
	}
	at, ok := c.Mark(mark)
	if !ok {
		return nil, fmt.Errorf("no step marked %q ran before this check", mark)
	}
	return statesSince(states, at), nil
}

func statesSince(states []Observed, at time.Time) []Observed {
	for i, o := range states {
		if !o.At.Before(at) {
			return states[i:]
		}
	}
	return nil
}
