// Package ghworkflow reads GitHub Actions workflow files as far as a
// grader needs: the events that start a workflow, its jobs, and each
// job's steps with their environment, and the shell commands a step
// runs, one logical line each. It runs nothing.
package ghworkflow

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// Dir is where a repository keeps its workflows.
const Dir = ".github/workflows"

// Workflow is one workflow file.
type Workflow struct {
	// File is the path, relative to the repository.
	File string
	Name string
	// On are the events that start it (push, pull_request, ...).
	On   []string
	Env  map[string]string
	Jobs []Job
}

// Job is one job of a workflow, in file order.
type Job struct {
	ID    string
	Env   map[string]string
	Steps []Step
}

// Step is one step: an action (Uses, With) or shell commands (Run).
type Step struct {
	Name string
	Uses string
	With map[string]string
	Run  string
	Env  map[string]string
}

// Load reads every workflow in the repository at root, in name order;
// files that are not YAML workflows are reported by name in bad.
func Load(root string) (wfs []Workflow, bad []string, err error) {
	var files []string
	for _, pat := range []string{"*.yml", "*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, Dir, pat))
		if err != nil {
			return nil, nil, err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		rel, _ := filepath.Rel(root, f)
		wf, err := Parse(data)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", rel, err))
			continue
		}
		wf.File = rel
		wfs = append(wfs, wf)
	}
	return wfs, bad, nil
}

// Parse reads one workflow.
func Parse(data []byte) (Workflow, error) {
	var raw struct {
		Name string         `json:"name"`
		On   any            `json:"on"`
		True any            `json:"true"` // YAML 1.1 reads the key on as true
		Env  map[string]any `json:"env"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return Workflow{}, err
	}
	var order struct {
		Jobs map[string]struct {
			Env   map[string]any `json:"env"`
			Steps []struct {
				Name string         `json:"name"`
				Uses string         `json:"uses"`
				With map[string]any `json:"with"`
				Run  string         `json:"run"`
				Env  map[string]any `json:"env"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(data, &order); err != nil {
		return Workflow{}, err
	}
	if len(order.Jobs) == 0 {
		return Workflow{}, fmt.Errorf("no jobs")
	}
	on := raw.On
	if on == nil {
		on = raw.True
	}
	wf := Workflow{Name: raw.Name, On: events(on), Env: strs(raw.Env)}
	ids, err := jobOrder(data)
	if err != nil {
		return Workflow{}, err
	}
	for _, id := range ids {
		j, ok := order.Jobs[id]
		if !ok {
			continue
		}
		job := Job{ID: id, Env: strs(j.Env)}
		for _, s := range j.Steps {
			job.Steps = append(job.Steps, Step{Name: s.Name, Uses: s.Uses, With: strs(s.With), Run: s.Run, Env: strs(s.Env)})
		}
		wf.Jobs = append(wf.Jobs, job)
	}
	return wf, nil
}

// jobOrder is the jobs' IDs in the order the file lists them (a map
// forgets it), read from the document's own nodes.
func jobOrder(data []byte) ([]string, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yamlv3.MappingNode {
		return nil, fmt.Errorf("not a mapping")
	}
	top := doc.Content[0].Content
	for i := 0; i+1 < len(top); i += 2 {
		if top[i].Value != "jobs" || top[i+1].Kind != yamlv3.MappingNode {
			continue
		}
		var ids []string
		for j, n := range top[i+1].Content {
			if j%2 == 0 {
				ids = append(ids, n.Value)
			}
		}
		return ids, nil
	}
	return nil, nil
}

func events(on any) []string {
	var out []string
	switch v := on.(type) {
	case string:
		out = []string{v}
	case []any:
		for _, e := range v {
			out = append(out, fmt.Sprint(e))
		}
	case map[string]any:
		for e := range v {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

func strs(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// Commands are the shell commands of run, one logical line each: lines
// continued with a backslash are joined, comments and blank lines
// dropped, and lines split at && ; and ||.
func Commands(run string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(run, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSpace(strings.TrimSuffix(line, "\\")) + " ")
			continue
		}
		cur.WriteString(line)
		for _, c := range splitter.Split(cur.String(), -1) {
			if c = strings.TrimSpace(c); c != "" {
				out = append(out, c)
			}
		}
		cur.Reset()
	}
	return out
}

var splitter = regexp.MustCompile(`\s*(&&|\|\||;)\s*`)

// Expand replaces ${{ env.X }}, $X and ${X} in s with env's values;
// what it cannot resolve it leaves.
func Expand(s string, env map[string]string) string {
	s = ghExpr.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := env[ghExpr.FindStringSubmatch(m)[1]]; ok {
			return v
		}
		return m
	})
	return shellVar.ReplaceAllStringFunc(s, func(m string) string {
		sub := shellVar.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		if v, ok := env[name]; ok {
			return v
		}
		return m
	})
}

var (
	ghExpr   = regexp.MustCompile(`\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)
	shellVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)
)

// StepEnv is the environment a step sees: the workflow's, the job's,
// then its own.
func StepEnv(wf Workflow, job Job, step Step) map[string]string {
	env := map[string]string{}
	for _, m := range []map[string]string{wf.Env, job.Env, step.Env} {
		for k, v := range m {
			env[k] = Expand(v, env)
		}
	}
	return env
}
