package checks

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// mutantPolicy is an admission policy and its binding.
type mutantPolicy struct {
	name  string
	probe string
}

// installMutantPolicy makes the policy that refuses m's writes to the
// operator, and waits until the API server enforces it: a dry-run create
// of a ConfigMap named probe, which the policy refuses to anyone, says so.
func installMutantPolicy(ctx context.Context, c *Context, m operatorMutant) (*mutantPolicy, error) {
	suffix := randomSuffix(5)
	pol := &mutantPolicy{name: "labctl-mutant-" + m.Name + "-" + suffix, probe: "labctl-mutant-probe-" + suffix}
	when := m.When
	if when == "" {
		when = "true"
	}
	id := c.Operator().Identity
	vap := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: pol.name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			// A condition that cannot be evaluated refuses nothing: the
			// policy must never break the cluster.
			FailurePolicy: ptr.To(admissionv1.Ignore),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: ops(m.Operations),
					Rule:       admissionv1.Rule{APIGroups: []string{m.APIGroup}, APIVersions: []string{"*"}, Resources: []string{m.Resource}},
				}},
				{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}},
			}},
			Validations: []admissionv1.Validation{
				{
					Expression: fmt.Sprintf("request.resource.resource != 'configmaps' || object.metadata.name != %q", pol.probe),
					Message:    pol.name + ": labctl's probe",
				},
				{
					Expression: fmt.Sprintf("request.resource.resource == 'configmaps' || request.userInfo.username != %q || !(%s)", id, when),
					Message:    fmt.Sprintf("%s: labctl's mutant makes the operator one that %s", pol.name, m.Doc),
					Reason:     ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: pol.name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        pol.name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	c.run.undoAtEnd(func(ctx context.Context) []string {
		if err := pol.remove(ctx, c); err != nil {
			return []string{"cleanup: " + oneLine(err)}
		}
		return nil
	})
	for _, obj := range []client.Object{vap, binding} {
		if err := c.Client().Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("creating the admission policy %s: %w", pol.name, err)
		}
	}
	if err := pol.await(ctx, c, true); err != nil {
		return nil, err
	}
	return pol, nil
}

func ops(names []string) []admissionv1.OperationType {
	out := make([]admissionv1.OperationType, len(names))
	for i, n := range names {
		out[i] = admissionv1.OperationType(n)
	}
	return out
}

// await waits until the API server enforces the policy (or no longer
// does), as its probe tells.
func (pol *mutantPolicy) await(ctx context.Context, c *Context, enforced bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: pol.probe, Namespace: c.Namespace()}}
	for {
		err := c.Client().Create(ctx, probe.DeepCopy(), client.DryRunAll)
		refused := err != nil && strings.Contains(err.Error(), pol.name)
		if err != nil && !refused && ctx.Err() == nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("probing the admission policy %s: %w", pol.name, err)
		}
		if refused == enforced {
			return nil
		}
		select {
		case <-ctx.Done():
			state := "enforce"
			if !enforced {
				state = "stop enforcing"
			}
			return fmt.Errorf("the API server did not %s the admission policy %s within 30s", state, pol.name)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// remove deletes the policy and its binding, and waits until the API
// server no longer enforces it.
func (pol *mutantPolicy) remove(ctx context.Context, c *Context) error {
	for _, obj := range []client.Object{
		&admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: pol.name}},
		&admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: pol.name}},
	} {
		if err := c.Client().Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the admission policy %s: %w", pol.name, err)
		}
	}
	return pol.await(ctx, c, false)
}
