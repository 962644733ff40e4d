//go:build unix

package honesty_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// TestEventsCheckReadsBothRecorders records Events on a real API server
// with both of client-go's recorders, the core one (record, which the
// course's mgr.GetEventRecorderFor returns) and the events.k8s.io one
// (events, the reference's mgr.GetEventRecorder), and runs the events
// check against them: each is read with its source, and a reason never
// recorded fails once the step's time is up.
func TestEventsCheckReadsBothRecorders(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a cluster")
	}
	step := func(id, about string, reasons ...string) labs.Step {
		return checkStep(t, id, "events", map[string]any{"about": "configmap/" + about, "reasons": reasons, "source": "database-controller"})
	}

	ns := "lab-0-9-events-" + time.Now().Format("150405")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	// The run creates its namespace; the Events are recorded once it
	// exists, as an operator would record them about objects in it.
	runDone, recorded := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(recorded)
		if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err == nil, nil
		}); err != nil {
			return // the run never made its namespace: its steps fail and say so
		}
		core := record.NewBroadcaster()
		defer core.Shutdown()
		core.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
		coreRec := core.NewRecorder(kube.Scheme, corev1.EventSource{Component: "database-controller"})
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "core-made", Namespace: ns, UID: "1"}}
		coreRec.Event(cm, corev1.EventTypeNormal, "Created", "StatefulSet created successfully")
		coreRec.Event(cm, corev1.EventTypeNormal, "Ready", "Database is ready")

		next := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
		next.StartRecordingToSink(ctx.Done())
		defer next.Shutdown()
		nextRec := next.NewRecorder(kube.Scheme, "database-controller")
		cm2 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new-made", Namespace: ns, UID: "2"}}
		nextRec.Eventf(cm2, nil, corev1.EventTypeNormal, "Created", "Create", "StatefulSet created")
		nextRec.Eventf(cm2, nil, corev1.EventTypeNormal, "Ready", "Reconcile", "Database is ready")
		<-runDone // the broadcasters send asynchronously: shutting down earlier would drop what is queued
	}()
	got := func() map[string]*report.CheckResult {
		defer close(runDone)
		return runSteps(ctx, t, nil, ns, 3*time.Second,
			step("core-recorder", "core-made", "Created", "Ready"),
			step("events-recorder", "new-made", "Created", "Ready"),
			step("never-recorded", "core-made", "Deleted"))
	}()
	<-recorded
	assert.Equal(t, report.Pass, got["core-recorder"].Status, got["core-recorder"].Message)
	assert.Equal(t, report.Pass, got["events-recorder"].Status, got["events-recorder"].Message)
	assert.Equal(t, report.Fail, got["never-recorded"].Status, got["never-recorded"].Message)
	assert.Contains(t, got["never-recorded"].Message, "no Event with reason Deleted")
	assert.Contains(t, got["never-recorded"].Observed, "Normal Created (database-controller), Normal Ready (database-controller)")
}
