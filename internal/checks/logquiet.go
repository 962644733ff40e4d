package checks

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name: "log-never-mentions",
		Doc:  "for the step's timeout, the operator's log since the run started has no line matching a pattern and naming an object (e.g. a reconcile error for an object that is gone)",
	}, runLogNeverMentions))
}

// logQuietPoll is how often the log is read again while watching it.
const logQuietPoll = 200 * time.Millisecond

// runLogNeverMentions watches the log for the whole timeout rather than
// reading it once: what it looks for (a Reconcile that returns an error
// for a deleted object, then its retries) comes a moment after the event
// that provokes it.
func runLogNeverMentions(ctx context.Context, c *Context, p *logParams) Outcome {
	if p.Controller != "" {
		return errorf("log-never-mentions takes no controller")
	}
	re := regexp.MustCompile(p.Pattern)
	deadline := time.Now().Add(c.Timeout)
	lines := 0
	for {
		log, ok, err := c.OperatorLog(ctx)
		if !ok {
			return skip("the operator's log cannot be read here")
		}
		if err != nil {
			return errorf("reading the operator's log: %v", oneLine(err))
		}
		all := strings.Split(log, "\n")
		lines = len(all) - 1
		var found []string
		for _, l := range all {
			if re.MatchString(l) && (p.Name == "" || strings.Contains(l, p.Name)) {
				found = append(found, l)
			}
		}
		if len(found) > 0 {
			return Outcome{Status: report.Fail,
				Message:  fmt.Sprintf("the operator's log has %d line(s) matching /%s/ about %s: %s", len(found), p.Pattern, p.Name, logline.Cut(strings.TrimSpace(compactLogLine(found[0])), 200)),
				Expected: fmt.Sprintf("no log line matching /%s/ that names %s", p.Pattern, p.Name),
				Observed: fmt.Sprintf("%d such line(s), first: %s", len(found), logline.Cut(strings.TrimSpace(compactLogLine(found[0])), 300)),
				Related:  []string{p.Name}}
		}
		if !time.Now().Before(deadline) {
			return pass("in %s the operator's log (%d lines) has no line matching /%s/ about %s", roundDur(c.Timeout), lines, p.Pattern, p.Name)
		}
		select {
		case <-ctx.Done():
			return errorf("reading the operator's log: %v", ctx.Err())
		case <-time.After(logQuietPoll):
		}
	}
}
