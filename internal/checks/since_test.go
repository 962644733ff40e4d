package checks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestStatesSince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	states := []Observed{{At: t0}, {At: t0.Add(time.Second)}, {At: t0.Add(2 * time.Second)}}
	assert.Len(t, statesSince(states, t0), 3)
	assert.Equal(t, states[1:], statesSince(states, t0.Add(time.Second)), "a state observed at the mark counts")
	assert.Len(t, statesSince(states, t0.Add(1500*time.Millisecond)), 1)
	assert.Empty(t, statesSince(states, t0.Add(time.Hour)))
}
