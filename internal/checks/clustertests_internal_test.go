package checks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/labctl/labctl/internal/gobuild"
)

// Only the tests' own stale writes since the run began are conflicts: not
// a create of a name that exists, not the operator's 409s, not an earlier
// run's.
func TestOwnConflicts(t *testing.T) {
	start := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	const tests = "system:serviceaccount:labctl-run:labctl-cluster-tests"
	ev := func(user, verb string, code int, name, sub string, at time.Duration) AuditEvent {
		e := AuditEvent{Verb: verb, User: auditUser{Username: user}, RequestReceivedTimestamp: start.Add(at),
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
		ev(tests, "update", 200, "db", "", time.Second),
		ev(tests, "update", 409, "db", "", 2*time.Second),
		ev(tests, "update", 409, "db", "", 3*time.Second),
		ev(tests, "patch", 409, "db", "status", 4*time.Second),
	}
	assert.Equal(t, []string{"update of databases default/db", "patch of databases default/db (status)"}, ownConflicts(evs, tests, start))
	assert.Empty(t, ownConflicts(evs[:4], tests, start))
}

// A failure is the conflict's only when the failed test printed the API
// server's answer to a stale write.
func TestFailedOnConflict(t *testing.T) {
	run := &gobuild.TestRun{Failed: []string{"./test/integration TestIntegration"}, Output: map[string][]string{
		"./test/integration TestIntegration": {`  [FAILED] Expected success, but got an error:`,
			`  Operation cannot be fulfilled on databases.database.example.com "integration-test-1": the object has been modified; please apply your changes to the latest version and try again`},
	}}
	assert.True(t, failedOnConflict(run))
	run.Output["./test/integration TestIntegration"] = []string{`  [FAILED] Timed out after 300.001s.`, `Expected <int32>: 1 to equal <int32>: 3`}
	assert.False(t, failedOnConflict(run))
}
