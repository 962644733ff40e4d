package checks

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name: "operator-idle",
		Doc:  "with nothing to do, for the step's timeout, the operator neither burns CPU nor keeps writing to the API (no hot reconcile loop)",
	}, runOperatorIdle))
}

// Defaults of idleParams: far above what an operator at rest uses (next to
// no CPU, no writes) and far below what a hot loop does (a core, and tens
// to hundreds of writes a second, however busy the machine).
const (
	defaultIdleMaxCPU    = 0.2
	defaultIdleMaxWrites = 5.0
)

type idleParams struct {
	// MaxCPU is the share of one core the manager may use while it has
	// nothing to do.
	MaxCPU float64 `json:"maxCPU"`
	// MaxWritesPerSecond bounds the operator's writes (create, update,
	// patch, delete, status included) while it has nothing to do.
	MaxWritesPerSecond float64 `json:"maxWritesPerSecond"`
}

func (p *idleParams) Validate() error {
	if p.MaxCPU < 0 || p.MaxWritesPerSecond < 0 {
		return fmt.Errorf("maxCPU and maxWritesPerSecond cannot be negative")
	}
	if p.MaxCPU == 0 {
		p.MaxCPU = defaultIdleMaxCPU
	}
	if p.MaxWritesPerSecond == 0 {
		p.MaxWritesPerSecond = defaultIdleMaxWrites
	}
	return nil
}

// runOperatorIdle watches the operator at rest, when the scenario has
// nothing left for it to do: a Reconcile that changes what it watches on
// every pass (a timestamp in the status, an annotation) or requeues at
// once (RequeueAfter: 30 is 30 nanoseconds) reconciles without end. That
// burns a core and floods the API server while every object looks right,
// which no check of the objects sees. It measures the manager's CPU time
// (where labctl runs the manager as a process) and the operator's writes
// in the audit log over the step's timeout; either is enough to judge, and
// with neither readable here the check is skipped.
func runOperatorIdle(ctx context.Context, c *Context, p *idleParams) Outcome {
	op := c.Operator()
	if op == nil {
		return skip("no operator deployed by labctl was found, so its load cannot be measured")
	}
	_, audited := c.auditPreconditions()
	cpu := op.CPU
	if cpu == nil && !audited {
		return skip("neither the manager's CPU time nor an API audit log can be read here, so a busy loop cannot be seen")
	}
	var cpuStart time.Duration
	if cpu != nil {
		var err error
		if cpuStart, err = cpu(ctx); err != nil {
			cpu = nil // the manager is not running: the operator-running check says so
		}
	}
	if audited {
		// Everything before the window is read now, so the window's own
		// writes are told by their time alone.
		if _, err := c.syncAudit(ctx); err != nil {
			return errorf("%v", oneLine(err))
		}
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return errorf("interrupted while watching the operator at rest")
	case <-time.After(c.Timeout):
	}
	window := time.Since(start)

	var problems, observed []string
	if cpu != nil {
		if cpuEnd, err := cpu(ctx); err == nil {
			share := float64(cpuEnd-cpuStart) / float64(window)
			observed = append(observed, fmt.Sprintf("%.0f%% of a core", 100*share))
			if share > p.MaxCPU {
				problems = append(problems, fmt.Sprintf("used %.0f%% of a core (CPU time %s in %s)", 100*share, roundDur(cpuEnd-cpuStart), roundDur(window)))
			}
		}
	}
	if audited {
		evs, err := c.syncAudit(ctx)
		if err != nil {
			return errorf("%v", oneLine(err))
		}
		end := start.Add(window)
		// Writes in this run's namespace only: the operator may be busy
		// elsewhere for good reasons (another run, a student's own objects).
		ns := c.Namespace()
		seen := map[string]bool{}
		byTarget := map[string]int{}
		writes := 0
		for i := range evs {
			ev := &evs[i]
			if !ev.By(op.Identity) || !isWrite(ev.Verb) || seen[ev.AuditID] || ev.ObjectRef == nil || ev.ObjectRef.Namespace != ns ||
				ev.RequestReceivedTimestamp.Before(start) || ev.RequestReceivedTimestamp.After(end) {
				continue
			}
			seen[ev.AuditID] = true
			writes++
			byTarget[describeWrite(ev)]++
		}
		rate := float64(writes) / window.Seconds()
		observed = append(observed, fmt.Sprintf("%d writes (%.1f/s)", writes, rate))
		if rate > p.MaxWritesPerSecond {
			problems = append(problems, fmt.Sprintf("sent %d writes in %s (%.0f a second): %s", writes, roundDur(window), rate, topWrites(byTarget, 3)))
		}
	}
	if len(observed) == 0 {
		return skip("the manager's CPU time could not be read (is it running?) and there is no audit log")
	}
	if len(problems) == 0 {
		return pass("at rest for %s, the operator used %s", roundDur(window), strings.Join(observed, " and sent "))
	}
	return Outcome{Status: report.Fail,
		Message: "with nothing left to do, the operator " + strings.Join(problems, ", and ") +
			": a hot reconcile loop (a Reconcile that changes what it watches on every pass, such as a timestamp or an annotation, or a RequeueAfter without a unit: 30 is 30 nanoseconds)",
		Expected: fmt.Sprintf("at rest: under %.0f%% of a core and %.0f writes a second", 100*p.MaxCPU, p.MaxWritesPerSecond),
		Observed: strings.Join(observed, ", ")}
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// describeWrite names a write as people read it: "PUT databases/my-db/status".
func describeWrite(ev *AuditEvent) string {
	o := ev.ObjectRef
	if o == nil {
		return method(ev.Verb) + " " + ev.RequestURI
	}
	s := method(ev.Verb) + " " + o.Resource
	if o.Name != "" {
		s += "/" + o.Name
	}
	if o.Subresource != "" {
		s += "/" + o.Subresource
	}
	return s
}

// topWrites lists the n most frequent writes, with their counts.
func topWrites(counts map[string]int, n int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}
