package checks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name:       "events",
		Doc:        "the operator recorded Events with these reasons about an object (read as kubectl get events shows them; the object may be gone)",
		Namespaced: true,
	}, runEvents))
}

type eventsParams struct {
	// About is the object the Events are about: involvedObject's kind and
	// name in the run's namespace. It may have been deleted since.
	About labs.Ref `json:"about"`
	// Reasons must each appear in at least one Event (Normal unless
	// Type says otherwise).
	Reasons []string `json:"reasons"`
	Type    string   `json:"type,omitempty"`
	// Source is the recorder's name: the Event's reportingComponent
	// (events.k8s.io recorders) or source.component (core recorders,
	// mgr.GetEventRecorderFor as the course uses). Empty: any recorder,
	// for a lab that judges the recorder's name in one task only.
	Source string `json:"source,omitempty"`
}

func (p *eventsParams) Validate() error {
	if p.About.IsZero() || len(p.Reasons) == 0 {
		return errors.New("needs about and reasons")
	}
	if p.Type != "" && p.Type != corev1.EventTypeNormal && p.Type != corev1.EventTypeWarning {
		return fmt.Errorf("type is Normal or Warning, not %q", p.Type)
	}
	return nil
}

// eventsPoll is how often the Events are listed while some are missing:
// a recorder sends them a few milliseconds after the change they tell of.
const eventsPoll = 200 * time.Millisecond

func runEvents(ctx context.Context, c *Context, p *eventsParams) Outcome {
	gvk, err := c.Lab().ResolveKind(p.About.Kind)
	if err != nil {
		return errorf("%v", err)
	}
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.name", p.About.Name),
		fields.OneTermEqualSelector("involvedObject.kind", gvk.Kind),
	)
	var listed bool
	var out Outcome
	err = wait.PollUntilContextTimeout(ctx, eventsPoll, c.Timeout, true, func(ctx context.Context) (bool, error) {
		list := &corev1.EventList{}
		if err := c.Client().List(ctx, list, client.InNamespace(c.Namespace()), client.MatchingFieldsSelector{Selector: selector}); err != nil {
			return false, err
		}
		listed = true
		out = judgeEvents(list.Items, gvk.Kind, p)
		return out.Status == report.Pass, nil
	})
	if err != nil && !listed {
		return errorf("listing the Events about %s: %s", p.About, oneLine(err))
	}
	out.Related = []string{p.About.Name}
	return out
}

// judgeEvents decides from the Events about one object whether the source
// recorded each reason with the type asked.
func judgeEvents(evs []corev1.Event, kind string, p *eventsParams) Outcome {
	typ := cmp.Or(p.Type, corev1.EventTypeNormal)
	var seen, missing, misrecorded []string
	for _, reason := range p.Reasons {
		found := false
		var instead []string
		for _, e := range evs {
			if e.Reason != reason {
				continue
			}
			switch src := eventSource(e); {
			case p.Source != "" && src != p.Source:
				instead = append(instead, "from "+cmp.Or(src, "no source"))
			case e.Type != typ:
				instead = append(instead, "of type "+e.Type)
			default:
				found = true
			}
		}
		switch {
		case found:
			seen = append(seen, reason)
		case len(instead) > 0:
			slices.Sort(instead)
			misrecorded = append(misrecorded, fmt.Sprintf("%s only %s", reason, strings.Join(slices.Compact(instead), " and ")))
		default:
			missing = append(missing, reason)
		}
	}
	if len(missing)+len(misrecorded) == 0 {
		return pass("%s recorded %s Events %s about %s/%s", cmp.Or(p.Source, "the operator"), typ, strings.Join(seen, ", "), strings.ToLower(kind), p.About.Name)
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, "no Event with reason "+strings.Join(missing, ", "))
	}
	problems = append(problems, misrecorded...)
	expected := fmt.Sprintf("%s Events with reasons %s (r.Recorder.Event)", typ, strings.Join(p.Reasons, ", "))
	if p.Source != "" {
		expected = fmt.Sprintf("%s Events with reasons %s from %s (r.Recorder.Event, the recorder made by mgr.GetEventRecorderFor(%q))", typ, strings.Join(p.Reasons, ", "), p.Source, p.Source)
	}
	return Outcome{Status: report.Fail,
		Message:  fmt.Sprintf("the Events about %s/%s: %s", strings.ToLower(kind), p.About.Name, strings.Join(problems, "; ")),
		Expected: expected,
		Observed: describeEvents(evs)}
}

// eventSource is who recorded an Event, whichever API recorded it.
func eventSource(e corev1.Event) string {
	return cmp.Or(e.ReportingController, e.Source.Component)
}

// describeEvents lists Events, oldest first, as kubectl get events sums
// them up.
func describeEvents(evs []corev1.Event) string {
	if len(evs) == 0 {
		return "no Events about it"
	}
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	var parts []string
	for _, e := range evs {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", e.Type, e.Reason, cmp.Or(eventSource(e), "no source")))
	}
	return strings.Join(slices.Compact(parts), ", ")
}
