package checks

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/labctl/labctl/internal/report"
)

// A progress-following wait ends at its timeout when the operator is idle,
// later while it keeps changing statuses, and never past its cap.
func TestProgressDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	timeout, idle := 6*time.Second, 3*time.Second
	limit := at(30)
	cases := []struct {
		name       string
		lastChange time.Time
		want       time.Time
	}{
		{"no progress at all: the timeout", time.Time{}, at(6)},
		{"progress long before the timeout: the timeout", at(1), at(6)},
		{"progress just before the timeout: idle after it", at(5), at(8)},
		{"progress keeps coming: idle after the last", at(20), at(23)},
		{"progress near the cap: the cap", at(29), at(30)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, progressDeadline(start, timeout, c.lastChange, idle, limit))
		})
	}
}

// A timed-out wait is a timeout to errors.Is and says how long it waited
// and what the operator did meanwhile.
func TestProgressCap(t *testing.T) {
	for _, c := range []struct {
		name                   string
		timeout, each, ceiling time.Duration
		workload               int
		want                   time.Duration
	}{
		{"each object is work", 6 * time.Second, 2 * time.Second, 0, 15, 36 * time.Second},
		{"no objects: the one waited for", 6 * time.Second, 2 * time.Second, 0, 0, 8 * time.Second},
		{"the ceiling bounds it", 6 * time.Second, 2 * time.Second, recreateCeiling, 50, recreateCeiling},
		{"below the ceiling it does not", 6 * time.Second, 2 * time.Second, recreateCeiling, 3, 12 * time.Second},
		{"never below the timeout", time.Minute, 20 * time.Second, recreateCeiling, 4, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, progressCap(c.timeout, c.workload, c.each, c.ceiling))
		})
	}
}

func TestWaitTimeoutSaysWhatHappened(t *testing.T) {
	plain := &waitTimeout{waited: 6 * time.Second, timeout: 6 * time.Second}
	assert.True(t, errors.Is(plain, context.DeadlineExceeded))
	assert.True(t, isTimeout(plain))
	assert.Equal(t, "timed out after 6s", plain.Error())

	idle := &waitTimeout{waited: 6 * time.Second, following: "the operator's databases, statefulsets and the namespace's pods, claims, Jobs"}
	assert.Equal(t, "timed out after 6s (none of the operator's databases, statefulsets and the namespace's pods, claims, Jobs changed meanwhile)", idle.Error())

	slowed := &waitTimeout{waited: 11 * time.Second, following: "the operator's databases", changes: 14, quietFor: 3 * time.Second}
	assert.Equal(t, "timed out after 11s (14 changes to the operator's databases meanwhile, the last 3s before the end)", slowed.Error())

	capped := &waitTimeout{waited: 36 * time.Second, following: "the operator's databases", changes: 90, quietFor: 100 * time.Millisecond, capped: true}
	assert.Contains(t, capped.Error(), "the most this step may take")
}

// A settle that never got quiet is reported, not swallowed.
func TestNeverQuietSaysWhy(t *testing.T) {
	err := &neverQuiet{quiet: time.Second, waited: 4 * time.Second, changes: 9}
	assert.Equal(t, "never unchanged for 1s within 4s (9 changes): the steps after it ran while the operator was still reacting", err.Error())
	assert.False(t, isTimeout(err), "a settle that never got quiet does not block the scenario")
}

// Once a course bug's signature is seen (labs.Stuck), the scenario's later
// failures are warnings that say why; before it, nothing is excused.
func TestExcuseAfterAStuckSignature(t *testing.T) {
	first := []Outcome{{Status: report.Fail}, {Status: report.Warn, Excuse: "backup/b stayed InProgress (course bug B32)"}}
	excused := excuse(first, "")
	assert.Equal(t, report.Fail, first[0].Status, "a failure in the same group as the signature stands")
	assert.Equal(t, "backup/b stayed InProgress (course bug B32)", excused)

	later := []Outcome{{Status: report.Fail}, {Status: report.Error}, {Status: report.Pass}}
	assert.Equal(t, excused, excuse(later, excused))
	assert.Equal(t, report.Warn, later[0].Status)
	assert.Equal(t, report.Warn, later[1].Status)
	assert.Equal(t, report.Pass, later[2].Status)
	assert.Contains(t, later[0].Notes, "reported as a warning: backup/b stayed InProgress (course bug B32)")
}

// A settle counts the writes to an object's children and Events as its
// own, and labctl's own requests as nobody's.
func TestSettleReadsRelatedWrites(t *testing.T) {
	for object, want := range map[string]bool{
		"test-db": true, "test-db-credentials": true, "test-db-0": true, "test-db.17f3a": true,
		"test-dbx": false, "other-db": false, "db-test-db": false,
	} {
		assert.Equal(t, want, relatedName(object, "test-db"), object)
	}
	evs := make([]AuditEvent, 3)
	evs[0].User.Username = "system:admin"
	evs[1].User.Username, evs[1].ObjectRef = "kubernetes-admin", &AuditObjectRef{Resource: "configmaps", Name: auditSyncPrefix + "abc"}
	evs[2].User.Username = "system:serviceaccount:x:y"
	assert.Equal(t, "kubernetes-admin", auditSyncUser(evs))
	assert.Empty(t, auditSyncUser(evs[2:]))
}

// A settle whose deadline passed, even while it read the audit log after
// the object fell quiet, never got quiet; a cancelled one says so.
func TestSettleEndedAtItsDeadlineIsNeverQuiet(t *testing.T) {
	start := time.Now().Add(-3 * time.Second)
	late, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	var nq *neverQuiet
	assert.ErrorAs(t, settleEnded(late, time.Second, start, 2), &nq)
	assert.Equal(t, 2, nq.changes)
	assert.GreaterOrEqual(t, nq.waited, 3*time.Second)

	stopped, stop := context.WithCancel(context.Background())
	stop()
	assert.ErrorIs(t, settleEnded(stopped, time.Second, start, 0), context.Canceled)
}

// settle's clock: quiet with nothing busy ends nil; a write the watch cannot
// see (busy > 0) extends it and counts as a change; an audit read that
// outlasts the deadline is never quiet, whatever it returned.
func TestQuietLoop(t *testing.T) {
	idle := func(context.Context) time.Duration { return 0 }
	assert.NoError(t, quietLoop(context.Background(), nil, 10*time.Millisecond, idle))

	calls := 0
	onceBusy := func(context.Context) time.Duration {
		if calls++; calls == 1 {
			return 20 * time.Millisecond
		}
		return 0
	}
	began := time.Now()
	assert.NoError(t, quietLoop(context.Background(), nil, 10*time.Millisecond, onceBusy))
	assert.Equal(t, 2, calls)
	assert.GreaterOrEqual(t, time.Since(began), 30*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	slowRead := func(ctx context.Context) time.Duration { <-ctx.Done(); return 0 }
	var nq *neverQuiet
	assert.ErrorAs(t, quietLoop(ctx, nil, 10*time.Millisecond, slowRead), &nq,
		"an audit read past the deadline proves no quiet")

	// A change that arrived resets the clock; a quiet longer than the
	// deadline can then never be reached.
	changed := make(chan struct{}, 1)
	changed <- struct{}{}
	busyWatch, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	assert.ErrorAs(t, quietLoop(busyWatch, changed, time.Hour, idle), &nq)
	assert.Equal(t, 1, nq.changes)
}
