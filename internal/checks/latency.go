package checks

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
)

// A lab's timeouts are written for an idle machine. On a loaded one (a
// class graded two at a time on two cores, other work beside verify) the
// API server, the controllers and the operator all slow down together, and
// fixed timeouts turn that into failed tasks. So a run measures how long a
// write takes on this cluster now and stretches every timeout and window
// by how much slower that is than on an idle machine: a grade must not
// depend on what else runs.

// idleWriteRTT is the median write round trip (a ConfigMap patch) an idle
// cluster of each profile is expected to answer in; twice as long is still
// taken as idle. Report.WriteLatency records what each run measured.
var idleWriteRTT = map[string]time.Duration{labs.ProfileLocal: 10 * time.Millisecond, labs.ProfileKind: 15 * time.Millisecond}

// maxStretch bounds the stretch: past it the machine is too busy to grade
// on, and the run should rather fail visibly than take forever.
const maxStretch = 8.0

// calibrate measures the median of a few write round trips in the run's
// namespace and sets r.stretch. It returns a note for the report when the
// timeouts were stretched.
func (r *run) calibrate(ctx context.Context) string {
	r.stretch = 1
	if r.ns == "" {
		return ""
	}
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = r.ns, "labctl-latency-probe"
	cm.Labels = map[string]string{kube.ManagedByLabel: kube.ManagedByValue}
	if err := r.client.Create(ctx, cm); err != nil {
		return ""
	}
	defer func() { _ = r.client.Delete(context.WithoutCancel(ctx), cm) }()
	var rtts []time.Duration
	for i := range 5 {
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"data":{"n":"%d"}}`, i))
		start := time.Now()
		if err := r.client.Patch(ctx, cm, patch); err != nil {
			return ""
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	median := rtts[len(rtts)/2]
	r.writeRTT = median
	idle := idleWriteRTT[r.profile]
	// Up to twice the idle time is an idle machine's spread.
	if idle == 0 || median <= 2*idle {
		return ""
	}
	r.stretch = min(float64(median)/float64(2*idle), maxStretch)
	if r.stretch < 1.1 {
		r.stretch = 1
		return ""
	}
	return fmt.Sprintf("the cluster was slow (a write took %s, about %s on an idle machine): timeouts were stretched ×%.1f", roundDur(median), roundDur(idle), r.stretch)
}

// stretched scales a lab duration by the run's measured slowness.
func (r *run) stretched(d time.Duration) time.Duration {
	if r.stretch <= 1 {
		return d
	}
	return time.Duration(float64(d) * r.stretch)
}
