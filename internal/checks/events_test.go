package checks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// Events as the two recorders write them: core (record, the course's
// mgr.GetEventRecorderFor) fills source.component; events.k8s.io (the
// reference's mgr.GetEventRecorder) fills reportingComponent.
func coreEvent(reason, typ, source string, at int) corev1.Event {
	return corev1.Event{Reason: reason, Type: typ, Source: corev1.EventSource{Component: source},
		LastTimestamp: metav1.NewTime(time.Unix(int64(at), 0))}
}

func newEvent(reason, typ, controller string, at int) corev1.Event {
	return corev1.Event{Reason: reason, Type: typ, ReportingController: controller,
		EventTime: metav1.NewMicroTime(time.Unix(int64(at), 0))}
}

func TestJudgeEvents(t *testing.T) {
	p := &eventsParams{About: labs.Ref{Kind: "database", Name: "test-events"}, Reasons: []string{"Created", "Ready"}, Source: "database-controller"}
	for _, tc := range []struct {
		name   string
		evs    []corev1.Event
		status report.Result
		says   string
	}{
		{"core recorder", []corev1.Event{coreEvent("Created", "Normal", "database-controller", 1), coreEvent("Ready", "Normal", "database-controller", 2)}, report.Pass, "database-controller recorded Normal Events Created, Ready about database/test-events"},
		{"events.k8s.io recorder", []corev1.Event{newEvent("Ready", "Normal", "database-controller", 2), newEvent("Created", "Normal", "database-controller", 1)}, report.Pass, "Created, Ready"},
		{"with others beside", []corev1.Event{coreEvent("Created", "Normal", "database-controller", 1), coreEvent("Progressing", "Normal", "database-controller", 2), coreEvent("Ready", "Normal", "database-controller", 3)}, report.Pass, ""},
		{"never ready", []corev1.Event{coreEvent("Created", "Normal", "database-controller", 1)}, report.Fail, "no Event with reason Ready"},
		{"none at all", nil, report.Fail, "no Event with reason Created, Ready"},
		{"another recorder name", []corev1.Event{coreEvent("Created", "Normal", "database", 1), coreEvent("Ready", "Normal", "database", 2)}, report.Fail, "Created only from database; Ready only from database"},
		{"no recorder name", []corev1.Event{coreEvent("Created", "Normal", "", 1), coreEvent("Ready", "Normal", "database-controller", 2)}, report.Fail, "Created only from no source"},
		{"a warning", []corev1.Event{coreEvent("Created", "Warning", "database-controller", 1), coreEvent("Ready", "Normal", "database-controller", 2)}, report.Fail, "Created only of type Warning"},
		{"right once, wrong too", []corev1.Event{coreEvent("Created", "Warning", "database-controller", 1), coreEvent("Created", "Normal", "database-controller", 2), coreEvent("Ready", "Normal", "database-controller", 3)}, report.Pass, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := judgeEvents(tc.evs, "Database", p)
			assert.Equal(t, tc.status, out.Status, out.Message)
			assert.Contains(t, out.Message, tc.says)
			if tc.status == report.Fail {
				assert.Contains(t, out.Expected, `mgr.GetEventRecorderFor("database-controller")`)
			}
		})
	}
	out := judgeEvents([]corev1.Event{coreEvent("Ready", "Normal", "db", 2), coreEvent("Created", "Normal", "db", 1), coreEvent("Created", "Normal", "db", 3)}, "Database", p)
	assert.Equal(t, "Normal Created (db), Normal Ready (db), Normal Created (db)", out.Observed, "oldest first")

	// No source asked: any recorder's Events count, the type still does.
	anySource := &eventsParams{About: p.About, Reasons: []string{"Deleting", "Deleted"}}
	out = judgeEvents([]corev1.Event{coreEvent("Deleting", "Normal", "db", 1), newEvent("Deleted", "Normal", "", 2)}, "Database", anySource)
	assert.Equal(t, report.Pass, out.Status, out.Message)
	assert.Contains(t, out.Message, "the operator recorded Normal Events Deleting, Deleted")
	out = judgeEvents([]corev1.Event{coreEvent("Deleting", "Warning", "db", 1)}, "Database", anySource)
	assert.Equal(t, report.Fail, out.Status)
	assert.Equal(t, "the Events about database/test-events: no Event with reason Deleted; Deleting only of type Warning", out.Message)
	assert.NotContains(t, out.Expected, "GetEventRecorderFor")
}
