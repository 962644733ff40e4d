package checks

import (
	"context"
	"fmt"
	"time"

	"github.com/labctl/labctl/internal/labs"
)

// HistorySince is ref's recorded states observed at or after a scenario
// mark (all of them when mark is ""): "during the scale" means the states
// after the step that started it, not the ones the object passed through
// before.
func (c *Context) HistorySince(ctx context.Context, ref labs.Ref, mark string) ([]Observed, error) {
	at, ok := c.Mark(mark)
	if mark != "" && !ok {
		return nil, fmt.Errorf("no step marked %q ran before this check", mark)
	}
	states, err := c.History(ctx, ref)
	if err != nil || mark == "" {
		return states, err
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
