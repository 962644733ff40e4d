package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name:       "count",
		Doc:        "exactly N objects of a kind in the namespace are controlled by the owner (applying the same object again made no duplicates)",
		Namespaced: true,
	}, runCount))
}

type countParams struct {
	// Owner is the object whose controller owner references are counted.
	Owner labs.Ref `json:"owner"`
	// Kind is the kind of the owned objects (statefulset).
	Kind   string `json:"kind"`
	Equals int    `json:"equals"`
}

func (p *countParams) Validate() error {
	if p.Owner.IsZero() || p.Kind == "" || p.Equals < 0 {
		return errors.New("needs owner, kind and equals (0 or more)")
	}
	return nil
}

func runCount(ctx context.Context, c *Context, p *countParams) Outcome {
	ownerGVR, err := c.Resolve(p.Owner)
	if err != nil {
		return errorf("%v", err)
	}
	owner, err := c.Dynamic().Resource(ownerGVR).Namespace(c.Namespace()).Get(ctx, p.Owner.Name, metav1.GetOptions{})
	if err != nil {
		return errorf("reading %s: %s", p.Owner, oneLine(err))
	}
	gvr, err := c.Resolve(labs.Ref{Kind: p.Kind, Name: "-"})
	if err != nil {
		return errorf("%v", err)
	}
	list, err := c.Dynamic().Resource(gvr).Namespace(c.Namespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return errorf("listing %s: %s", gvr.Resource, oneLine(err))
	}
	var owned []string
	for _, it := range list.Items {
		if ref := metav1.GetControllerOf(&it); ref != nil && ref.UID == owner.GetUID() {
			owned = append(owned, it.GetName())
		}
	}
	what := fmt.Sprintf("%d %s controlled by %s", len(owned), gvr.Resource, p.Owner)
	if len(owned) > 0 {
		what += " (" + strings.Join(owned, ", ") + ")"
	}
	if len(owned) != p.Equals {
		return Outcome{Status: report.Fail, Message: "there are " + what,
			Expected: fmt.Sprintf("exactly %d", p.Equals), Observed: what}
	}
	return pass("there are %s", what)
}
