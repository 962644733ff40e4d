package verify_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/report"
	"github.com/labctl/labctl/internal/verify"
)

// reportOf is a report of one check per task, each with the status given.
func reportOf(statuses map[string]report.Result) *report.Report {
	r := &report.Report{}
	for id, st := range statuses {
		msg := "found it"
		if st == report.Error {
			msg = "the API server went away"
		}
		r.Tasks = append(r.Tasks, &report.Task{ID: id, Checks: []*report.CheckResult{{ID: "c" + id, Tasks: []string{id}, Status: st, Message: msg}}})
	}
	return r
}

// runs returns a run that hands out the reports given, one per call, and
// counts the calls.
func runs(reps ...*report.Report) (func(context.Context) (*report.Report, error), *int) {
	n := 0
	return func(context.Context) (*report.Report, error) {
		n++
		return reps[n-1], nil
	}, &n
}

func TestMeasureRunsOnceWhenEverythingWasDecided(t *testing.T) {
	first := reportOf(map[string]report.Result{"1.1": report.Pass, "1.2": report.Fail})
	// Not run behind a step that failed: decided (the step's failure says why).
	first.Tasks[0].Checks = append(first.Tasks[0].Checks, &report.CheckResult{ID: "x", Status: report.Error, Message: report.NotRun + "step 1 failed"})
	run, n := runs(first)
	rep, note, err := verify.Measure(context.Background(), run)
	require.NoError(t, err)
	assert.Same(t, first, rep)
	assert.Empty(t, note)
	assert.Equal(t, 1, *n)
}

func TestMeasureRunsAgainWhatCouldNotDecide(t *testing.T) {
	first := reportOf(map[string]report.Result{"1.1": report.Error})
	second := reportOf(map[string]report.Result{"1.1": report.Fail})
	run, n := runs(first, second)
	rep, note, err := verify.Measure(context.Background(), run)
	require.NoError(t, err)
	assert.Same(t, second, rep, "the second verification stands, whatever it decides")
	assert.Equal(t, "verified a second time: the first verification could not decide task 1.1", note)
	assert.Equal(t, 2, *n, "once more, and no more")
}

func TestMeasureKeepsTheFirstWhenNoTimeIsLeft(t *testing.T) {
	first := reportOf(map[string]report.Result{"1.1": report.Error})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n := 0
	rep, note, err := verify.Measure(ctx, func(context.Context) (*report.Report, error) {
		n++
		time.Sleep(500 * time.Millisecond) // half a second left: no room for a second run and half again
		return first, nil
	})
	require.NoError(t, err)
	assert.Same(t, first, rep)
	assert.Equal(t, "the verification could not decide task 1.1, and the time limit left no room to verify again", note)
	assert.Equal(t, 1, n)
}

func TestMeasureReturnsTheErrors(t *testing.T) {
	broken := errors.New("the cluster is gone")
	_, note, err := verify.Measure(context.Background(), func(context.Context) (*report.Report, error) { return nil, broken })
	assert.ErrorIs(t, err, broken)
	assert.Empty(t, note)

	first := reportOf(map[string]report.Result{"1.1": report.Error})
	n := 0
	_, note, err = verify.Measure(context.Background(), func(context.Context) (*report.Report, error) {
		n++
		if n == 1 {
			return first, nil
		}
		return nil, broken
	})
	assert.ErrorIs(t, err, broken, "a second run that could not run is the grader's failure, not a verdict")
	assert.Contains(t, note, "verified a second time")
}
