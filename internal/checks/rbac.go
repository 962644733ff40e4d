package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/labctl/labctl/internal/report"
)

type rbacParams struct {
	Group       string `json:"group"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"`
	// NonResourceURL, instead of a resource, is a path the API server
	// serves outside the API (/metrics: what a metrics reader may get).
	NonResourceURL string   `json:"nonResourceURL,omitempty"`
	Verbs          []string `json:"verbs"`
	// Scope is "cluster" (all namespaces, as a manager's cache watches;
	// the default) or "namespace" (the run's namespace).
	Scope string `json:"scope,omitempty"`
}

func (p *rbacParams) Validate() error {
	if (p.Resource == "") == (p.NonResourceURL == "") || len(p.Verbs) == 0 {
		return errors.New("needs verbs and either resource or nonResourceURL")
	}
	if p.NonResourceURL != "" && (p.Group != "" || p.Subresource != "" || p.Scope == "namespace") {
		return errors.New("a nonResourceURL has no group, subresource or namespace")
	}
	if p.Scope != "" && p.Scope != "cluster" && p.Scope != "namespace" {
		return errors.New("scope is cluster or namespace")
	}
	return nil
}

func init() {
	Register(Typed(Definition{
		Name: "rbac",
		Doc:  "the operator's identity may do verbs on a resource (SubjectAccessReview)",
	}, runRBAC))
}

// saGroups are the groups a ServiceAccount's requests carry.
func saGroups(identity string) []string {
	parts := strings.Split(identity, ":")
	if len(parts) == 4 && parts[0] == "system" && parts[1] == "serviceaccount" {
		return []string{"system:serviceaccounts", "system:serviceaccounts:" + parts[2], "system:authenticated"}
	}
	return []string{"system:authenticated"}
}

func runRBAC(ctx context.Context, c *Context, p *rbacParams) Outcome {
	op := c.Operator()
	if op == nil || op.Identity == "" {
		return skip("the operator's identity is unknown (no operator deployed by labctl), so its permissions cannot be reviewed")
	}
	ns := ""
	if p.Scope == "namespace" {
		ns = c.Namespace()
	}
	what := p.Resource
	if p.Group != "" {
		what += "." + p.Group
	}
	if p.Subresource != "" {
		what += "/" + p.Subresource
	}
	where := "in all namespaces"
	if ns != "" {
		where = "in namespace " + ns
	}
	if p.NonResourceURL != "" {
		what, where = p.NonResourceURL, "(a non-resource URL)"
	}
	var denied, allowed []string
	var reasons []string
	for _, verb := range p.Verbs {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   op.Identity,
			Groups: saGroups(op.Identity),
		}}
		if p.NonResourceURL != "" {
			sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: p.NonResourceURL, Verb: verb}
		} else {
			sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource,
			}
		}
		if err := c.Client().Create(ctx, sar); err != nil {
			return errorf("SubjectAccessReview for %s: %v", op.Identity, oneLine(err))
		}
		if sar.Status.Allowed {
			allowed = append(allowed, verb)
		} else {
			denied = append(denied, verb)
			if r := strings.TrimSpace(sar.Status.Reason + " " + sar.Status.EvaluationError); r != "" {
				reasons = append(reasons, r)
			}
		}
	}
	out := Outcome{
		Expected: fmt.Sprintf("%s may %s %s %s", op.Identity, strings.Join(p.Verbs, ", "), what, where),
	}
	if len(denied) == 0 {
		out.Status = report.Pass
		out.Message = fmt.Sprintf("%s may %s %s %s", op.Identity, strings.Join(allowed, ", "), what, where)
		return out
	}
	out.Status = report.Fail
	out.Message = fmt.Sprintf("%s may not %s %s %s", op.Identity, strings.Join(denied, ", "), what, where)
	out.Observed = "denied: " + strings.Join(denied, ", ")
	if len(reasons) > 0 {
		out.Observed += " (" + strings.Join(reasons, "; ") + ")"
	}
	return out
}
