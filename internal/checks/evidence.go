package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/report"
)

const (
	maxObjectLines = 40
	maxEvents      = 6
	maxLogLines    = 8
	maxLineLen     = 300
)

// toCheck turns an outcome into a report entry, adding evidence (the last
// observed object, related events, an operator log excerpt) when the check
// did not pass. Every string that came from the cluster is cleaned of
// control characters here.
func (r *run) toCheck(ctx context.Context, step *labs.Step, out Outcome) *report.CheckResult {
	c := &report.CheckResult{
		ID:       step.ID,
		Title:    step.Title.In(r.o.Lang),
		Tasks:    slices.Clone(step.Tasks),
		Status:   out.Status,
		Message:  report.Clean(out.Message),
		Expected: report.Clean(out.Expected),
		Observed: report.Clean(out.Observed),
		Hidden:   step.Hidden,
	}
	for _, n := range out.Notes {
		c.Notes = append(c.Notes, report.Clean(n))
	}
	if c.Status == "" {
		c.Status = report.Error
		c.Message = "the check returned no result"
	}
	if step.Severity == "warn" && (c.Status == report.Fail || c.Status == report.Error) {
		why := "the lab text does not require this, the course's solution files do"
		if step.Why != nil {
			why = step.Why.In(r.o.Lang)
		}
		c.Notes = append(c.Notes, "reported as a warning: "+why)
		c.Status = report.Warn
	}
	if c.Status == report.Pass || c.Status == report.Skipped || strings.HasPrefix(out.Message, notRun) {
		return c
	}
	if n := forbiddenNote(r.forbidden(ctx)); n != "" {
		c.Notes = append(c.Notes, n)
	}
	if out.Object != nil {
		c.Object = TrimObject(out.Object)
	}
	if r.ns != "" && len(out.Related) > 0 {
		c.Events = r.events(ctx, out.Related)
	}
	c.Logs = r.logExcerpt(ctx, out.Related)
	return c
}

// TrimObject renders an object as YAML for evidence: kind and name, then
// metadata without the noise (managedFields, last-applied annotations),
// then status (what the operator and controllers reported), then spec
// without the bulk (the pod template down to container images, defaulted
// StatefulSet policies), capped in length.
func TrimObject(u *unstructured.Unstructured) string {
	obj := runtime.DeepCopyJSON(u.Object)
	md, _ := obj["metadata"].(map[string]any)
	if md != nil {
		delete(md, "managedFields")
		if ann, ok := md["annotations"].(map[string]any); ok {
			delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	spec, _ := obj["spec"].(map[string]any)
	if spec != nil {
		if tmpl, ok := spec["template"].(map[string]any); ok {
			var images []any
			containers, _, _ := unstructured.NestedSlice(tmpl, "spec", "containers")
			for _, ct := range containers {
				m, _ := ct.(map[string]any)
				images = append(images, map[string]any{"name": m["name"], "image": m["image"]})
			}
			spec["template"] = map[string]any{"spec": map[string]any{"containers": images}}
		}
		for _, k := range []string{"volumeClaimTemplates", "persistentVolumeClaimRetentionPolicy", "podManagementPolicy", "revisionHistoryLimit", "updateStrategy"} {
			delete(spec, k)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", u.GetKind(), u.GetName())
	for _, part := range []string{"metadata", "status", "spec"} {
		v, ok := obj[part]
		if !ok {
			continue
		}
		raw, err := yaml.Marshal(map[string]any{part: v})
		if err == nil {
			b.Write(raw)
		}
	}
	lines := strings.Split(strings.TrimRight(report.Clean(b.String()), "\n"), "\n")
	if len(lines) > maxObjectLines {
		lines = append(lines[:maxObjectLines], fmt.Sprintf("… (%d more lines)", len(lines)-maxObjectLines))
	}
	for i, l := range lines {
		lines[i] = logline.Cut(l, maxLineLen)
	}
	return strings.Join(lines, "\n")
}

// events returns the namespace's events about the named objects, oldest
// first, as "Type Reason (source): message".
func (r *run) events(ctx context.Context, names []string) []string {
	list := &corev1.EventList{}
	if err := r.client.List(ctx, list, client.InNamespace(r.ns)); err != nil {
		return []string{"(events unavailable: " + oneLine(err) + ")"}
	}
	var evs []corev1.Event
	for _, e := range list.Items {
		if slices.Contains(names, e.InvolvedObject.Name) || (e.Related != nil && slices.Contains(names, e.Related.Name)) {
			evs = append(evs, e)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(evs[i]).Before(eventTime(evs[j])) })
	if len(evs) > maxEvents {
		evs = evs[len(evs)-maxEvents:]
	}
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		src := e.ReportingController
		if src == "" {
			src = e.Source.Component
		}
		line := fmt.Sprintf("%s %s %s/%s", e.Type, e.Reason, strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name)
		if src != "" {
			line += " (" + src + ")"
		}
		line += ": " + e.Message
		if e.Count > 1 {
			line += fmt.Sprintf(" (×%d)", e.Count)
		}
		out = append(out, logline.Cut(report.CleanLine(line), maxLineLen))
	}
	return out
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// logExcerpt returns the operator's log lines since the run started that
// mention one of names (the last few), or the last lines when none does.
func (r *run) logExcerpt(ctx context.Context, names []string) []string {
	log, ok, err := r.operatorLog(ctx)
	if !ok {
		return nil
	}
	if err != nil {
		return []string{"(operator log unavailable: " + oneLine(err) + ")"}
	}
	// Error-level lines first, whatever they name: a refused request or a
	// failed reconcile is often the cause of what the check saw.
	errs := errorLogLines(log, maxErrorLines)
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	var hits []string
	for _, l := range lines {
		for _, n := range names {
			if n != "" && strings.Contains(l, n) {
				hits = append(hits, l)
				break
			}
		}
	}
	if len(hits) == 0 {
		hits = lines
		if len(hits) > 4 {
			hits = hits[len(hits)-4:]
		}
	}
	if len(hits) > maxLogLines-len(errs) {
		hits = hits[len(hits)-(maxLogLines-len(errs)):]
	}
	out := errs
	for _, l := range hits {
		if l = logline.Cut(strings.TrimSpace(report.CleanLine(compactLogLine(l))), maxLineLen); l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// noisyKeys are what controller-runtime adds to every reconcile's log
// line; the message and the operator's own keys are what a student needs.
var noisyKeys = []string{"controller", "controllerGroup", "controllerKind", "reconcileID", "namespace", "name"}

// compactLogLine shortens a zap console line (TIME LEVEL MESSAGE {json}) by
// dropping controller-runtime's per-reconcile keys from its JSON part.
func compactLogLine(line string) string {
	i := strings.Index(line, "\t{")
	if i < 0 {
		i = strings.Index(line, " {\"")
	}
	if i < 0 || !strings.HasSuffix(strings.TrimSpace(line), "}") {
		return line
	}
	var kv map[string]any
	if json.Unmarshal([]byte(strings.TrimSpace(line[i:])), &kv) != nil {
		return line
	}
	kind, _ := kv["controllerKind"].(string)
	for _, k := range noisyKeys {
		delete(kv, k)
	}
	if kind != "" {
		delete(kv, kind) // the reconciled object, {"name":..,"namespace":..}
	}
	head := strings.TrimSpace(line[:i])
	if len(kv) == 0 {
		return head
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v, _ := json.Marshal(kv[k])
		parts = append(parts, k+"="+string(v))
	}
	return head + " " + strings.Join(parts, " ")
}

// logLine is one line of a zap console log (TIME LEVEL [LOGGER] MESSAGE
// {json}), as kubebuilder's main.go configures it.
type logLine struct {
	level, msg string
	kv         map[string]any
}

// parseLogLine splits a zap console line; ok is false for other lines
// (a panic's stack, plain prints).
func parseLogLine(line string) (logLine, bool) {
	var ll logLine
	head := line
	if i := strings.Index(line, "\t{"); i >= 0 && strings.HasSuffix(strings.TrimSpace(line), "}") {
		if json.Unmarshal([]byte(strings.TrimSpace(line[i:])), &ll.kv) == nil {
			head = line[:i]
		}
	}
	fields := strings.Split(head, "\t")
	if len(fields) < 3 {
		return ll, false
	}
	ll.level = strings.ToUpper(strings.TrimSpace(fields[1]))
	ll.msg = strings.TrimSpace(fields[len(fields)-1])
	return ll, true
}
