package checks

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/report"
)

// What a failed check's evidence adds about the operator itself, whatever
// the check looked at: the API requests it was refused (403 in the audit
// log) and the lines it logged at error level. A missing RBAC rule shows
// up as a controller that never starts or a Database that never becomes
// Ready; the refusals say why.

const maxErrorLines = 3

// notRun starts the message of a check that did not run because a step
// before it failed: it carries no evidence of its own.
const notRun = report.NotRun

// klogError matches a klog line at error level (client-go's reflector
// reports a refused list or watch that way: E1201 07:03:21.123 ...).
var klogError = regexp.MustCompile(`^E[0-9]{4} `)

var digits = regexp.MustCompile(`[0-9]+`)

// errorLogLines returns the distinct error-level lines (zap ERROR, klog E)
// of the operator's log since the run started, first ones first.
func errorLogLines(log string, limit int) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range strings.Split(log, "\n") {
		isErr := klogError.MatchString(l)
		if ll, ok := parseLogLine(l); ok && ll.level == "ERROR" {
			isErr = true
		}
		if !isErr {
			continue
		}
		c := strings.TrimSpace(report.CleanLine(compactLogLine(l)))
		// The same error repeats with new timestamps: compare without them.
		key := digits.ReplaceAllString(c, "")
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, logline.Cut(c, maxLineLen))
		if len(out) == limit {
			break
		}
	}
	return out
}

// forbiddenCache keeps the summary of refused requests for a moment: many
// checks fail together when an operator lacks a permission.
type forbiddenCache struct {
	mu      sync.Mutex
	at      time.Time
	summary []string
}

// forbidden summarises the operator's requests that the API refused (403)
// since the run started, as "list backups.database.example.com
// (all namespaces) ×12"; nil when there were none or no audit log.
func (r *run) forbidden(ctx context.Context) []string {
	op := r.o.Operator
	if op == nil || op.Identity == "" || r.o.Cluster.Env.AuditLog == nil {
		return nil
	}
	r.forbid.mu.Lock()
	defer r.forbid.mu.Unlock()
	if time.Since(r.forbid.at) < 2*time.Second {
		return r.forbid.summary
	}
	evs, err := ReadAudit(ctx, r.o.Cluster.Env, r.auditOffset)
	if err != nil {
		return r.forbid.summary
	}
	counts := map[string]int{}
	for i := range evs {
		ev := &evs[i]
		if ev.Code() != 403 || !ev.By(op.Identity) || ev.ObjectRef == nil {
			continue
		}
		what := ev.ObjectRef.Resource
		if ev.ObjectRef.APIGroup != "" {
			what += "." + ev.ObjectRef.APIGroup
		}
		if ev.ObjectRef.Subresource != "" {
			what += "/" + ev.ObjectRef.Subresource
		}
		where := "all namespaces"
		if ev.ObjectRef.Namespace != "" {
			where = "namespace " + ev.ObjectRef.Namespace
		}
		counts[fmt.Sprintf("%s %s (%s)", ev.Verb, what, where)]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s ×%d", k, counts[k]))
	}
	r.forbid.at, r.forbid.summary = time.Now(), out
	return out
}

// forbiddenNote is the note a failed check carries about refused requests.
func forbiddenNote(summary []string) string {
	if len(summary) == 0 {
		return ""
	}
	return "the API refused the operator's requests (403 Forbidden, from the audit log): " + strings.Join(summary, "; ") +
		". Its RBAC lacks these permissions: add +kubebuilder:rbac markers and run make manifests."
}
