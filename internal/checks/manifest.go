package checks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/logline"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name: "apply-file",
		Doc:  "a manifest of the project (the student's website-crd.yaml) applies to the cluster as kubectl apply -f would, and its CRDs become Established; skipped when the project has no such file (the student applied it by hand)",
	}, runApplyFile))
	Register(Typed(Definition{
		Name: "api-resource",
		Doc:  "API discovery (kubectl api-resources, /apis/GROUP/VERSION) lists the resource, with its kind, scope and short names",
	}, runAPIResource))
}

type applyFileParams struct {
	// File is relative to the project directory.
	File string `json:"file"`
}

func (p *applyFileParams) Validate() error {
	if p.File == "" || filepath.IsAbs(p.File) || strings.Contains(p.File, "..") {
		return errors.New("needs file, relative to the project")
	}
	return nil
}

func runApplyFile(ctx context.Context, c *Context, p *applyFileParams) Outcome {
	if c.ProjectDir() == "" {
		return skip("no project directory to read %s from: the checks read what is in the cluster (kubectl apply -f %s)", p.File, p.File)
	}
	raw, err := os.ReadFile(filepath.Join(c.ProjectDir(), p.File))
	if errors.Is(err, os.ErrNotExist) {
		return skip("the project has no %s: the checks read what is in the cluster (apply yours with kubectl apply -f)", p.File)
	}
	if err != nil {
		return errorf("reading %s: %v", p.File, err)
	}
	objs, err := kube.DecodeYAML(raw)
	if err != nil {
		return fail("%s is not valid YAML: %s", p.File, oneLine(err))
	}
	if len(objs) == 0 {
		return fail("%s holds no object", p.File)
	}
	applier, err := kube.NewApplier(c.Config())
	if err != nil {
		return errorf("connecting to the cluster: %v", oneLine(err))
	}
	var applied, crds []string
	for _, obj := range objs {
		what := obj.GetKind() + " " + obj.GetName()
		if obj.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, obj.GetName())
		} else if obj.GetNamespace() == "" {
			obj.SetNamespace(c.Namespace())
		}
		if err := applier.ApplyOne(ctx, obj); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
				return Outcome{Status: report.Fail, Message: fmt.Sprintf("the API server rejects %s of %s: %s", what, p.File, logline.Cut(oneLine(err), 300)),
					Expected: "kubectl apply -f " + p.File + " succeeds", Observed: "rejected"}
			}
			return errorf("applying %s of %s: %v", what, p.File, oneLine(err))
		}
		applied = append(applied, what)
	}
	if err := applier.WaitEstablished(ctx, crds); err != nil {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("%s: %s", p.File, oneLine(err)),
			Expected: "its CRDs Established", Observed: "not Established"}
	}
	return pass("kubectl apply -f %s: %s", p.File, strings.Join(applied, ", "))
}

type apiResourceParams struct {
	// GroupVersion is example.com/v1.
	GroupVersion string `json:"groupVersion"`
	// Resource is the plural: websites.
	Resource   string   `json:"resource"`
	Kind       string   `json:"kind,omitempty"`
	Namespaced *bool    `json:"namespaced,omitempty"`
	ShortNames []string `json:"shortNames,omitempty"`
}

func (p *apiResourceParams) Validate() error {
	if p.GroupVersion == "" || p.Resource == "" {
		return errors.New("needs groupVersion and resource")
	}
	return nil
}

func runAPIResource(_ context.Context, c *Context, p *apiResourceParams) Outcome {
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config())
	if err != nil {
		return errorf("discovery client: %v", err)
	}
	list, err := dc.ServerResourcesForGroupVersion(p.GroupVersion)
	if apierrors.IsNotFound(err) {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("the API server does not serve %s (kubectl get --raw /apis/%s is NotFound)", p.GroupVersion, p.GroupVersion),
			Expected: p.GroupVersion + " served", Observed: "not served"}
	}
	if err != nil {
		return errorf("discovery of %s: %v", p.GroupVersion, oneLine(err))
	}
	var names []string
	var res *metav1.APIResource
	for i := range list.APIResources {
		names = append(names, list.APIResources[i].Name)
		if list.APIResources[i].Name == p.Resource {
			res = &list.APIResources[i]
		}
	}
	if res == nil {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("/apis/%s does not list %s", p.GroupVersion, p.Resource),
			Expected: p.Resource, Observed: strings.Join(names, ", ")}
	}
	var problems []string
	if p.Kind != "" && res.Kind != p.Kind {
		problems = append(problems, fmt.Sprintf("kind %s, not %s", res.Kind, p.Kind))
	}
	if p.Namespaced != nil && res.Namespaced != *p.Namespaced {
		problems = append(problems, fmt.Sprintf("namespaced %t, not %t", res.Namespaced, *p.Namespaced))
	}
	for _, s := range p.ShortNames {
		if !slices.Contains(res.ShortNames, s) {
			problems = append(problems, fmt.Sprintf("no short name %s (has %v)", s, res.ShortNames))
		}
	}
	if len(problems) > 0 {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("%s in /apis/%s: %s", p.Resource, p.GroupVersion, strings.Join(problems, "; ")),
			Expected: describeAPIResource(p), Observed: strings.Join(problems, "; ")}
	}
	return pass("/apis/%s lists %s (kind %s, short names %v)", p.GroupVersion, p.Resource, res.Kind, res.ShortNames)
}

func describeAPIResource(p *apiResourceParams) string {
	s := p.Resource
	if p.Kind != "" {
		s += ", kind " + p.Kind
	}
	if len(p.ShortNames) > 0 {
		s += ", short names " + strings.Join(p.ShortNames, ", ")
	}
	return s
}
