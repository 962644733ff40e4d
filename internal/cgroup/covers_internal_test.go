package cgroup

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A limit whose controller is missing fails New rather than going unset.
func TestCoversNeedsEachLimitsController(t *testing.T) {
	s := Support{Version: 2, Controllers: []string{"pids", "memory"}}
	assert.NoError(t, s.covers(Limits{Pids: 10, Memory: 1 << 20}))
	assert.ErrorContains(t, s.covers(Limits{CPUWeight: 50}), "no cpu controller")
	assert.ErrorContains(t, Support{Version: 1, Controllers: []string{"cpu"}}.covers(Limits{Memory: 1}), "cgroup v1 here offers no memory controller")
	assert.NoError(t, Support{}.covers(Limits{Memory: 1}), "no cgroups at all is New's ErrUnsupported")
}
