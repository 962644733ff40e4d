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
		Name:       "owned-by",
		Doc:        "an object of a kind, owned by the given object, is in the given state (evidence that work was really done)",
		Namespaced: true,
	}, runOwned))
}

// ownedParams: some object of Kind whose ownerReferences name Owner
// satisfies When. Used where status alone could be faked: a Backup marked
// Completed must have a backup Job of its own that completed.
type ownedParams struct {
	Owner labs.Ref         `json:"owner"`
	Kind  string           `json:"kind"`
	When  []labs.Assertion `json:"when"`
}

func (p *ownedParams) Validate() error {
	if p.Owner.IsZero() || p.Kind == "" || len(p.When) == 0 {
		return errors.New("needs owner, kind and when")
	}
	return nil
}

func runOwned(ctx context.Context, c *Context, p *ownedParams) Outcome {
	ownerGVR, err := c.Resolve(p.Owner)
	if err != nil {
		return errorf("%v", err)
	}
	owner, err := c.Dynamic().Resource(ownerGVR).Namespace(c.Namespace()).Get(ctx, p.Owner.Name, metav1.GetOptions{})
	if err != nil {
		return fail("%s is not there: %v", p.Owner, err)
	}
	gvr, err := c.Resolve(labs.Ref{Kind: p.Kind, Name: "-"})
	if err != nil {
		return errorf("%v", err)
	}
	list, err := c.Dynamic().Resource(gvr).Namespace(c.Namespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return errorf("list %s: %v", gvr.Resource, err)
	}
	want := DescribeAssertions(p.When)
	var owned []string
	for i := range list.Items {
		obj := &list.Items[i]
		if !ownedBy(obj.GetOwnerReferences(), owner.GetUID()) {
			continue
		}
		if ok, _ := EvalAssertions(obj, p.When); ok {
			return pass("%s/%s, owned by %s, has %s", p.Kind, obj.GetName(), p.Owner, want)
		}
		owned = append(owned, obj.GetName())
	}
	out := Outcome{Status: report.Fail, Related: []string{p.Owner.Name}, Object: owner,
		Expected: fmt.Sprintf("a %s owned by %s with %s", p.Kind, p.Owner, want)}
	if len(owned) == 0 {
		out.Message = fmt.Sprintf("%s reports its work done, but no %s owned by it exists", p.Owner, p.Kind)
		out.Observed = fmt.Sprintf("no %s in the namespace has an owner reference to %s", p.Kind, p.Owner)
	} else {
		out.Message = fmt.Sprintf("no %s owned by %s has %s", p.Kind, p.Owner, want)
		out.Observed = "owned: " + strings.Join(owned, ", ")
	}
	return out
}

func ownedBy(refs []metav1.OwnerReference, uid any) bool {
	for _, r := range refs {
		if string(r.UID) == fmt.Sprint(uid) {
			return true
		}
	}
	return false
}
