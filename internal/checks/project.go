package checks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name: "project",
		Doc:  "the project was made by kubebuilder init with the domain and repository asked for (PROJECT and go.mod agree)",
	}, runProject))
}

type projectParams struct {
	Domain string `json:"domain"`
	Repo   string `json:"repo"`
	// Layouts are the accepted kubebuilder layouts (default go.kubebuilder.io/v4).
	Layouts []string `json:"layouts,omitempty"`
}

func (p *projectParams) Validate() error {
	if p.Domain == "" || p.Repo == "" {
		return errors.New("needs domain and repo")
	}
	return nil
}

func runProject(_ context.Context, c *Context, p *projectParams) Outcome {
	dir := c.ProjectDir()
	if dir == "" {
		return skip("no project directory to read (pass --project DIR)")
	}
	layouts := p.Layouts
	if len(layouts) == 0 {
		layouts = []string{"go.kubebuilder.io/v4"}
	}
	expected := fmt.Sprintf("kubebuilder init --domain %s --repo %s: PROJECT with domain %s, repo %s, layout %s; go.mod module %s",
		p.Domain, p.Repo, p.Domain, p.Repo, strings.Join(layouts, " or "), p.Repo)
	raw, err := os.ReadFile(filepath.Join(dir, "PROJECT"))
	if err != nil {
		return Outcome{Status: report.Fail, Message: "no PROJECT file: the project was not created with kubebuilder init", Expected: expected}
	}
	var proj struct {
		Domain string   `json:"domain"`
		Repo   string   `json:"repo"`
		Layout []string `json:"layout"`
	}
	if err := yaml.Unmarshal(raw, &proj); err != nil {
		return Outcome{Status: report.Fail, Message: "PROJECT does not parse: " + oneLine(err), Expected: expected}
	}
	var problems []string
	if proj.Domain != p.Domain {
		problems = append(problems, fmt.Sprintf("PROJECT has domain %q, not %q", proj.Domain, p.Domain))
	}
	if proj.Repo != p.Repo {
		problems = append(problems, fmt.Sprintf("PROJECT has repo %q, not %q", proj.Repo, p.Repo))
	}
	if !slices.ContainsFunc(proj.Layout, func(l string) bool { return slices.Contains(layouts, l) }) {
		problems = append(problems, fmt.Sprintf("PROJECT has layout %s, not %s", strings.Join(proj.Layout, ", "), strings.Join(layouts, " or ")))
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	switch {
	case err != nil:
		problems = append(problems, "no go.mod")
	default:
		if path := modfile.ModulePath(mod); path != p.Repo {
			problems = append(problems, fmt.Sprintf("go.mod declares module %q, not %q", path, p.Repo))
		}
	}
	if len(problems) > 0 {
		return Outcome{Status: report.Fail, Message: strings.Join(problems, "; "), Expected: expected, Observed: strings.Join(problems, "; ")}
	}
	return pass("PROJECT: domain %s, repo %s, layout %s; go.mod module %s", proj.Domain, proj.Repo, strings.Join(proj.Layout, ", "), p.Repo)
}
