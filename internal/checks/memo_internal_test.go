package checks

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/gobuild"
)

// One control serves the steps of a verification: the first step to ask
// runs it, the others wait for it and read it, or learn it could not run.
func TestSharedControl(t *testing.T) {
	r := &run{}
	first, ours := r.control("k")
	require.True(t, ours)
	var wg sync.WaitGroup
	var got baselineRun
	var ok, theirs bool
	wg.Go(func() {
		var s *sharedControl
		s, theirs = r.control("k")
		got, ok = s.wait()
	})
	want := baselineRun{run: &gobuild.TestRun{Passed: []string{"TestA"}}}
	first.keep(want)
	first.settle() // the deferred settle of the step that ran it
	wg.Wait()
	assert.False(t, theirs, "the second step must not run a control of its own")
	assert.True(t, ok)
	assert.Equal(t, want, got)

	failed, ours := r.control("other")
	require.True(t, ours)
	failed.settle() // the step ended before its control ran
	again, ours := r.control("other")
	assert.False(t, ours)
	_, ok = again.wait()
	assert.False(t, ok, "a control that never ran must not be read as one that passed")
}
