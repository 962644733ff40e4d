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
	Group string `json:"group"`
	// Groups, instead of Group, are alternatives: the verbs granted in any
	// one of them will do. Events are the case: a record.EventRecorder
	// (mgr.GetEventRecorderFor, as the course does) writes them in the core
	// group, an events.EventRecorder (mgr.GetEventRecorder) in events.k8s.io.
	Groups      []string `json:"groups,omitempty"`
	Resource    string   `json:"resource"`
	Subresource string   `json:"subresource,omitempty"`
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
	if p.Group != "" && len(p.Groups) > 0 {
		return errors.New("group and groups are alternatives: set one")
	}
	if p.NonResourceURL != "" && (p.Group != "" || len(p.Groups) > 0 || p.Subresource != "" || p.Scope == "namespace") {
		return errors.New("a nonResourceURL has no group, subresource or namespace")
	}
	if p.Scope != "" && p.Scope != "cluster" && p.Scope != "namespace" {
		return errors.New("scope is cluster or namespace")
	}
	return nil
}

// groups are the API groups to review, each an alternative.
func (p *rbacParams) groups() []string {
	if len(p.Groups) > 0 {
		return p.Groups
	}
	return []string{p.Group}
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
	where := "in all namespaces"
	if ns != "" {
		where = "in namespace " + ns
	}
	var whats, denials, deniedVerbs []string
	for _, group := range p.groups() {
		what := p.Resource
		if group != "" {
			what += "." + group
		}
		if p.Subresource != "" {
			what += "/" + p.Subresource
		}
		if p.NonResourceURL != "" {
			what, where = p.NonResourceURL, "(a non-resource URL)"
		}
		whats = append(whats, what)
		allowed, denied, reasons, err := reviewVerbs(ctx, c, op.Identity, ns, group, p)
		if err != nil {
			return errorf("SubjectAccessReview for %s: %v", op.Identity, oneLine(err))
		}
		if len(denied) == 0 {
			return pass("%s may %s %s %s", op.Identity, strings.Join(allowed, ", "), what, where)
		}
		deniedVerbs = denied
		denial := fmt.Sprintf("%s on %s", strings.Join(denied, ", "), what)
		if len(reasons) > 0 {
			denial += " (" + strings.Join(reasons, "; ") + ")"
		}
		denials = append(denials, denial)
	}
	what := strings.Join(whats, " or ")
	if len(whats) > 1 {
		deniedVerbs = p.Verbs // denied in every alternative, each its own way
	}
	return Outcome{Status: report.Fail,
		Message:  fmt.Sprintf("%s may not %s %s %s", op.Identity, strings.Join(deniedVerbs, ", "), what, where),
		Expected: fmt.Sprintf("%s may %s %s %s", op.Identity, strings.Join(p.Verbs, ", "), what, where),
		Observed: "denied: " + strings.Join(denials, "; "),
	}
}

// reviewVerbs asks the API server, one SubjectAccessReview per verb,
// whether identity may do each verb on the resource in group (or on the
// non-resource URL).
func reviewVerbs(ctx context.Context, c *Context, identity, ns, group string, p *rbacParams) (allowed, denied, reasons []string, err error) {
	for _, verb := range p.Verbs {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   identity,
			Groups: saGroups(identity),
		}}
		if p.NonResourceURL != "" {
			sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: p.NonResourceURL, Verb: verb}
		} else {
			sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: group, Resource: p.Resource, Subresource: p.Subresource,
			}
		}
		if err := c.Client().Create(ctx, sar); err != nil {
			return nil, nil, nil, err
		}
		if sar.Status.Allowed {
			allowed = append(allowed, verb)
			continue
		}
		denied = append(denied, verb)
		if r := strings.TrimSpace(sar.Status.Reason + " " + sar.Status.EvaluationError); r != "" {
			reasons = append(reasons, r)
		}
	}
	return allowed, denied, reasons, nil
}
