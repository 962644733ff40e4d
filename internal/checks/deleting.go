package checks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name:       "deletion-began",
		Doc:        "within the step's timeout, one of the objects is gone or being deleted (a cleanup started, in whatever order it deletes)",
		Namespaced: true,
	}, runDeletionBegan))
}

// deletionBeganParams names the children a cleanup deletes. Any one of
// them gone or carrying a deletionTimestamp is evidence that the cleanup
// ran: a cleanup may delete them in any order, and one that waits for each
// child to go before deleting the next (the lab 4.2 text's pattern) stops
// at the first child labctl holds.
type deletionBeganParams struct {
	Refs []labs.Ref `json:"refs"`
}

func (p *deletionBeganParams) Validate() error {
	if len(p.Refs) == 0 {
		return errors.New("needs refs")
	}
	return nil
}

// deletionPoll is how often the objects are read again.
const deletionPoll = 100 * time.Millisecond

func runDeletionBegan(ctx context.Context, c *Context, p *deletionBeganParams) Outcome {
	deadline := time.Now().Add(c.Timeout)
	var names []string
	for _, r := range p.Refs {
		names = append(names, r.String())
	}
	for {
		var state []string
		for _, r := range p.Refs {
			gvr, err := c.Resolve(r)
			if err != nil {
				return errorf("%v", err)
			}
			obj, err := c.Dynamic().Resource(gvr).Namespace(c.Namespace()).Get(ctx, r.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return pass("%s is gone", r)
			case err != nil:
				if ctx.Err() != nil {
					return errorf("reading %s: %s", r, oneLine(err))
				}
				state = append(state, fmt.Sprintf("%s: %s", r, oneLine(err)))
			case obj.GetDeletionTimestamp() != nil:
				return pass("%s is being deleted (deletionTimestamp %s)", r, obj.GetDeletionTimestamp().UTC().Format(time.RFC3339))
			default:
				state = append(state, r.String()+" is there, not being deleted")
			}
		}
		if !time.Now().Before(deadline) {
			return Outcome{Status: report.Fail,
				Message:  fmt.Sprintf("in %s none of %s was deleted: the cleanup never started", c.Timeout, strings.Join(names, ", ")),
				Expected: "one of them gone or with a deletionTimestamp (the cleanup deletes them, in any order)",
				Observed: strings.Join(state, "; ")}
		}
		select {
		case <-ctx.Done():
			return errorf("waiting for a deletion: %v", ctx.Err())
		case <-time.After(deletionPoll):
		}
	}
}

func init() {
	Register(Typed(Definition{
		Name:       "cleanup-deleted",
		Doc:        "within the step's timeout, every object is gone, deleted by the owner's cleanup; skipped when the owner never carried the cleanup's finalizer (then no cleanup ran, a defect of its own)",
		Namespaced: true,
	}, runCleanupDeleted))
}

// cleanupDeletedParams: the objects a cleanup must have deleted while its
// owner (recorded in the scenario) still exists, so the garbage collector
// deleted none of them.
type cleanupDeletedParams struct {
	Owner     labs.Ref   `json:"owner"`
	Finalizer string     `json:"finalizer"`
	Refs      []labs.Ref `json:"refs"`
}

func (p *cleanupDeletedParams) Validate() error {
	if p.Owner.IsZero() || p.Finalizer == "" || len(p.Refs) == 0 {
		return errors.New("needs owner, finalizer and refs")
	}
	return nil
}

func runCleanupDeleted(ctx context.Context, c *Context, p *cleanupDeletedParams) Outcome {
	states, err := c.History(ctx, p.Owner)
	if err != nil {
		return errorf("%v", err)
	}
	had := false
	for _, o := range states {
		if o.Object != nil && slices.Contains(o.Object.GetFinalizers(), p.Finalizer) {
			had = true
			break
		}
	}
	if !had {
		return skip("%s never carried the finalizer %s, so no cleanup ran to judge here (the finalizer's own task says so)", p.Owner, p.Finalizer)
	}
	deadline := time.Now().Add(c.Timeout)
	for {
		var there []string
		for _, r := range p.Refs {
			gvr, err := c.Resolve(r)
			if err != nil {
				return errorf("%v", err)
			}
			obj, err := c.Dynamic().Resource(gvr).Namespace(c.Namespace()).Get(ctx, r.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return errorf("reading %s: %s", r, oneLine(err))
			case obj.GetDeletionTimestamp() != nil:
				there = append(there, r.String()+" (being deleted)")
			default:
				there = append(there, r.String())
			}
		}
		if len(there) == 0 {
			var names []string
			for _, r := range p.Refs {
				names = append(names, r.String())
			}
			return pass("the cleanup of %s deleted %s", p.Owner, strings.Join(names, ", "))
		}
		if !time.Now().Before(deadline) {
			return Outcome{Status: report.Fail, Related: []string{p.Owner.Name},
				Message:  fmt.Sprintf("the cleanup of %s finished (its finalizer %s is gone) but left %s: while %s exists the garbage collector deletes none of its children, so the cleanup must", p.Owner, p.Finalizer, strings.Join(there, ", "), p.Owner),
				Expected: "every child deleted by the cleanup, in any order",
				Observed: "still there: " + strings.Join(there, ", ")}
		}
		select {
		case <-ctx.Done():
			return errorf("waiting for the cleanup: %v", ctx.Err())
		case <-time.After(deletionPoll):
		}
	}
}
