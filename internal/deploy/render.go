// Package deploy installs a kubebuilder project's operator into a cluster:
// rendering its kustomize config, applying it server-side, and either
// waiting for the Deployment (kind, existing clusters) or running the
// manager as a local process (the local provider, like `make run`).
package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/render"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/userr"
)

// Project is a kubebuilder project on disk.
type Project struct {
	Dir string
	// Name is PROJECT's projectName (e.g. postgres-operator), else the
	// directory's base name.
	Name string
}

// LoadProject checks that dir looks like a kubebuilder v4 project.
func LoadProject(dir string) (*Project, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, userr.Usage(fmt.Sprintf("project directory %s does not exist", abs), "pass --project with the path to your kubebuilder project")
	}
	for _, need := range []string{"go.mod", filepath.Join("config", "default", "kustomization.yaml")} {
		if _, err := os.Stat(filepath.Join(abs, need)); err != nil {
			return nil, userr.Usage(fmt.Sprintf("%s is not a kubebuilder project: %s is missing", abs, need),
				"point --project at the directory where you ran `kubebuilder init` (it has PROJECT, go.mod and config/)")
		}
	}
	name := filepath.Base(abs)
	if raw, err := os.ReadFile(filepath.Join(abs, "PROJECT")); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "projectName:"); ok {
				name = strings.Trim(strings.TrimSpace(v), `"'`)
			}
		}
	}
	return &Project{Dir: abs, Name: SafeName(name)}, nil
}

// SafeName turns a project name (from PROJECT, which the project's
// author controls) into one that is safe as a single path element and a
// label: lowercase letters, digits and '-', at most 63, never empty. A
// name like "../../.." cannot lead a directory out of labctl's state.
func SafeName(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if len(out) > 63 {
		out = strings.TrimRight(out[:63], "-")
	}
	if out == "" {
		return "operator"
	}
	return out
}

// Render builds config/default with the kustomize library (no kustomize or
// kubectl binary needed) and returns the objects in apply order: namespaces
// and CRDs first, then RBAC, then the rest.
func (p *Project) Render() ([]*unstructured.Unstructured, error) {
	return p.RenderIn(context.Background(), nil)
}

// RenderIn is Render in box when box is set (grading: the submission's
// kustomization is read as the box's user, offline; see render.Boxed).
func (p *Project) RenderIn(ctx context.Context, box *sandbox.Box) ([]*unstructured.Unstructured, error) {
	dir := filepath.Join(p.Dir, "config", "default")
	var raw []byte
	var err error
	if box == nil {
		raw, err = render.Kustomize(dir)
	} else {
		raw, err = render.Boxed(ctx, box, dir)
		var build *render.BuildError
		if err != nil && !errors.As(err, &build) {
			return nil, fmt.Errorf("cannot render config/default in the sandbox: %w", err)
		}
	}
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitUsage, "cannot render config/default: "+firstLine(err.Error()),
			"run `kustomize build config/default` (or `make deploy`) in the project to see the full error")
	}
	objs, err := kube.DecodeYAML(raw)
	if err != nil {
		return nil, err
	}
	kube.SortForApply(objs)
	return objs, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
