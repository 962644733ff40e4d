package checks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/labctl/labctl/internal/gobuild"
)

// Only the tests' own refused writes since the run began are conflicts:
// not a create of a name that exists, not the operator's 409s, not an
// earlier run's. Each says how long after the tests' last fresh copy it
// was sent.
func TestOwnConflicts(t *testing.T) {
	start := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	const tests = "system:serviceaccount:labctl-run:labctl-cluster-tests"
	ev := func(user, verb string, code int, name, sub string, at time.Duration) AuditEvent {
		e := AuditEvent{Verb: verb, User: auditUser{Username: user}, RequestReceivedTimestamp: start.Add(at), StageTimestamp: start.Add(at + 5*time.Millisecond),
			ObjectRef: &AuditObjectRef{Resource: "databases", Namespace: "default", Name: name, Subresource: sub}}
		e.ResponseStatus = &struct {
			Code    int    `json:"code"`
			Message string `json:"message,omitempty"`
		}{Code: code}
		return e
	}
	evs := []AuditEvent{
		ev(tests, "update", 409, "earlier-run", "", -time.Second),
		ev(tests, "create", 409, "exists", "", time.Second),
		ev("system:serviceaccount:postgres-operator-system:manager", "update", 409, "db", "", time.Second),
		ev(tests, "create", 201, "db", "", time.Second),
		ev(tests, "get", 200, "db", "", 2*time.Second),
		ev(tests, "update", 409, "db", "", 2*time.Second+50*time.Millisecond),
		ev(tests, "update", 409, "db", "", 2*time.Second+60*time.Millisecond),
		ev(tests, "patch", 409, "db", "status", 2*time.Second+70*time.Millisecond),
		// Read at 3 s, updated at 20 s.
		ev(tests, "get", 200, "old", "", 3*time.Second),
		ev(tests, "update", 409, "old", "", 20*time.Second),
		// A list is a fresh copy of each.
		ev(tests, "list", 200, "", "", 29*time.Second),
		ev(tests, "update", 409, "old", "", 30*time.Second),
		// Not read since the list.
		ev(tests, "update", 409, "unread", "", 40*time.Second),
		ev(tests, "update", 409, "never-read", "", 0),
	}
	assert.Equal(t, []string{
		"update of databases default/db, sent 45ms after they read it",
		"update of databases default/db, sent 55ms after they read it",
		"patch of databases default/db (status), sent 65ms after they read it",
		"update of databases default/old, sent 17s after they read it",
		"update of databases default/old, sent 995ms after they read it",
		"update of databases default/unread, sent 11s after they read it",
		"update of databases default/never-read",
	}, ownConflicts(evs, tests, start))
	assert.Empty(t, ownConflicts(evs[:5], tests, start))
}

// A failure is the conflict's only when the failed test printed the API
// server's answer to a stale write; in a Ginkgo suite, every failed spec.
func TestFailedOnConflict(t *testing.T) {
	run := &gobuild.TestRun{Failed: []string{"./test/integration TestIntegration"}, Output: map[string][]string{
		"./test/integration TestIntegration": {`  [FAILED] Expected success, but got an error:`,
			`  Operation cannot be fulfilled on databases.database.example.com "integration-test-1": the object has been modified; please apply your changes to the latest version and try again`},
	}}
	assert.True(t, failedOnConflict(run))
	run.Output["./test/integration TestIntegration"] = []string{`  [FAILED] Timed out after 300.001s.`, `Expected <int32>: 1 to equal <int32>: 3`}
	assert.False(t, failedOnConflict(run))

	// The lifecycle spec lost the race; the other spec never saw its
	// Service: a failure of its own.
	lifecycle := []string{"------------------------------", "• [FAILED] [2.387 seconds]",
		"Database Operator Integration Database lifecycle [It] should create, update, and delete a Database",
		`  Operation cannot be fulfilled on databases.database.example.com "x": the object has been modified; please apply your changes to the latest version and try again`,
		"------------------------------"}
	children := []string{"• [TIMEDOUT] [60.001 seconds]", "Database Operator Integration Database lifecycle [It] should create all child resources",
		"  Timed out after 60.000s.", "------------------------------"}
	run.Output["./test/integration TestIntegration"] = lifecycle
	assert.True(t, failedOnConflict(run))
	run.Output["./test/integration TestIntegration"] = append(lifecycle, children...)
	assert.False(t, failedOnConflict(run))
}
