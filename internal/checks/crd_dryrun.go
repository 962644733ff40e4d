package checks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/report"
)

type dryRunParams struct {
	Object map[string]any `json:"object"`
	// Reject: the create must be refused (validation).
	Reject bool `json:"reject,omitempty"`
	// Defaults: assertions on the object the API server would store.
	Defaults []labs.Assertion `json:"defaults,omitempty"`
}

func (p *dryRunParams) Validate() error {
	u := unstructured.Unstructured{Object: p.Object}
	if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
		return errors.New("object needs apiVersion, kind and metadata.name")
	}
	return nil
}

func runDryRun(ctx context.Context, c *Context, p *dryRunParams) Outcome {
	obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(p.Object)}
	obj.SetNamespace(c.Namespace())
	gvk := obj.GroupVersionKind()
	m, err := c.Client().RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return errorf("the cluster does not serve %s (is its CRD installed?)", gvk.GroupKind())
	}
	spec, _ := json.Marshal(obj.Object["spec"])
	what := fmt.Sprintf("%s with spec %s", gvk.Kind, spec)
	got, err := c.Dynamic().Resource(m.Resource).Namespace(c.Namespace()).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager})
	if p.Reject {
		if err == nil {
			return Outcome{Status: report.Fail, Message: fmt.Sprintf("the API server accepted %s: the schema does not validate it", what),
				Expected: "rejected by validation", Observed: "accepted", Object: got}
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return pass("the API server rejects %s: %s", what, logline.Cut(oneLine(err), 240))
		}
		return errorf("dry-run create of %s: %v", what, oneLine(err))
	}
	if err != nil {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("the API server rejected %s: %s", what, logline.Cut(oneLine(err), 240)),
			Expected: "accepted", Observed: "rejected"}
	}
	if ok, obs := EvalAssertions(got, p.Defaults); !ok {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("dry-run create of %s: the stored object lacks the defaults", what),
			Expected: DescribeAssertions(p.Defaults), Observed: obs, Object: got}
	}
	if len(p.Defaults) > 0 {
		return pass("dry-run create of %s: accepted, with %s", what, DescribeAssertions(p.Defaults))
	}
	return pass("dry-run create of %s: accepted", what)
}
