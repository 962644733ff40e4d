package checks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/labctl/labctl/internal/ghworkflow"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name: "ci-workflow",
		Doc:  "a GitHub Actions workflow of the project, on push or pull request, creates a kind cluster, builds the operator's image, loads that image into that cluster, deploys the operator and runs the integration tests, in that order (read for what its steps do, not how they are written)",
	}, runCIWorkflow))
}

type workflowParams struct {
	// Tests is the directory of the tests the workflow must run.
	Tests string `json:"tests"`
	// Uninstalled is something the course's workflow waits for that
	// nothing in it installs: the course's mistake warns, it does not
	// fail.
	Uninstalled *uninstalledWait `json:"uninstalled,omitempty"`
}

type uninstalledWait struct {
	// Name is what the wait names (cert-manager).
	Name string `json:"name"`
	Why  string `json:"why"`
}

func (p *workflowParams) Validate() error {
	if p.Tests == "" {
		return errors.New("needs tests")
	}
	if u := p.Uninstalled; u != nil && (u.Name == "" || u.Why == "") {
		return errors.New("uninstalled needs name and why")
	}
	return nil
}

// The stages a workflow must go through, in this order within one job
// (a kind cluster does not outlive its job's machine).
const (
	stageCluster = "creates a kind cluster"
	stageBuild   = "builds the operator's image"
	stageLoad    = "loads the image into the kind cluster"
	stageDeploy  = "deploys the operator"
	stageTests   = "runs the integration tests"
)

var stageOrder = []string{stageCluster, stageBuild, stageLoad, stageDeploy, stageTests}

// jobPlan is what one job does: the step (1-based) of each stage, the
// image each stage names, the kind cluster's name, and the waits for
// what nothing installed.
type jobPlan struct {
	file, job string
	at        map[string]int
	images    map[string]string
	clusters  map[string]string
	waits     []string
}

func (j *jobPlan) reached() int {
	n := 0
	last := 0
	for _, s := range stageOrder {
		at, ok := j.at[s]
		if !ok || at < last {
			break
		}
		n++
		last = at
	}
	return n
}

var (
	kindCreate    = regexp.MustCompile(`^kind\s+create\s+cluster\b`)
	kindLoad      = regexp.MustCompile(`^kind\s+load\s+(docker-image|image-archive)\s+`)
	engineBuild   = regexp.MustCompile(`^(sudo\s+)?(docker|podman)\s+(buildx\s+)?build\b`)
	makeCall      = regexp.MustCompile(`^make\s+(.*)$`)
	kubectlApply  = regexp.MustCompile(`^kubectl\s+(apply|create)\b.*\s(-k|--kustomize)[\s=]\S*config/default`)
	kustomizePipe = regexp.MustCompile(`^(kustomize\s+build|kubectl\s+kustomize)\s+\S*config/default\b.*\|\s*kubectl\s+apply`)
	helmInstall   = regexp.MustCompile(`^helm\s+(install|upgrade)\b`)
	goTestCmd     = regexp.MustCompile(`^(go\s+test|ginkgo)\b`)
	kubectlWait   = regexp.MustCompile(`^kubectl\s+(wait|rollout\s+status)\b`)
	flagValue     = func(cmd, names string) string {
		re := regexp.MustCompile(`\s(` + names + `)[\s=](\S+)`)
		if m := re.FindStringSubmatch(" " + cmd); m != nil {
			return strings.Trim(m[2], `"'`)
		}
		return ""
	}
)

// makefile is what the project's Makefile says: each target's recipe,
// and the variables it gives defaults.
type makefile struct {
	recipes map[string][]string
	vars    map[string]string
	// weak are the variables set with ?=, which the environment
	// overrides.
	weak map[string]bool
}

var (
	makeTarget = regexp.MustCompile(`^([A-Za-z0-9_.-]+)\s*:([^=]|$)`)
	makeVar    = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*([?:]?)=\s*(.*)$`)
)

func readMakefile(dir string) makefile {
	mk := makefile{recipes: map[string][]string{}, vars: map[string]string{}, weak: map[string]bool{}}
	data, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		return mk
	}
	target := ""
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "\t") && target != "":
			mk.recipes[target] = append(mk.recipes[target], strings.TrimLeft(strings.TrimSpace(line), "@-"))
		case makeVar.MatchString(line):
			m := makeVar.FindStringSubmatch(line)
			mk.vars[m[1]] = strings.TrimSpace(m[3])
			mk.weak[m[1]] = m[2] == "?"
			target = ""
		case makeTarget.MatchString(line):
			target = makeTarget.FindStringSubmatch(line)[1]
		default:
			target = ""
		}
	}
	return mk
}

// planJob reads what a job's steps do.
func planJob(wf ghworkflow.Workflow, job ghworkflow.Job, mk makefile, p *workflowParams) *jobPlan {
	plan := &jobPlan{file: wf.File, job: job.ID, at: map[string]int{}, images: map[string]string{}, clusters: map[string]string{}}
	installed := false
	mark := func(stage string, step int) {
		if _, ok := plan.at[stage]; !ok {
			plan.at[stage] = step
		}
	}
	testsDir := strings.Trim(p.Tests, "./")
	runsTests := func(cmd string) bool {
		return goTestCmd.MatchString(cmd) && strings.Contains(cmd, testsDir)
	}
	for i, step := range job.Steps {
		n := i + 1
		env := ghworkflow.StepEnv(wf, job, step)
		uses := strings.SplitN(step.Uses, "@", 2)[0]
		switch uses {
		case "helm/kind-action", "engineerd/setup-kind", "container-tools/kind-action":
			mark(stageCluster, n)
			name := step.With["cluster_name"]
			if name == "" {
				name = map[string]string{"helm/kind-action": "chart-testing", "container-tools/kind-action": "kind"}[uses]
			}
			if name == "" {
				name = step.With["name"]
			}
			if name == "" {
				name = "kind"
			}
			plan.clusters[stageCluster] = name
		case "docker/build-push-action":
			mark(stageBuild, n)
			plan.images[stageBuild] = strings.TrimSpace(strings.Split(ghworkflow.Expand(step.With["tags"], env), ",")[0])
		}
		var cmds []string
		for _, c := range ghworkflow.Commands(step.Run) {
			cmds = append(cmds, ghworkflow.Expand(c, env))
		}
		for _, cmd := range cmds {
			if p.Uninstalled != nil && strings.Contains(cmd, p.Uninstalled.Name) {
				switch {
				case kubectlWait.MatchString(cmd):
					if !installed {
						plan.waits = append(plan.waits, cmd)
					}
				default:
					installed = true
				}
			}
			switch {
			case kindCreate.MatchString(cmd):
				mark(stageCluster, n)
				plan.clusters[stageCluster] = orDefault(flagValue(cmd, "--name|-n"), "kind")
			case kindLoad.MatchString(cmd):
				mark(stageLoad, n)
				fields := strings.Fields(kindLoad.ReplaceAllString(cmd, ""))
				for _, f := range fields {
					if !strings.HasPrefix(f, "-") {
						plan.images[stageLoad] = strings.Trim(f, `"'`)
						break
					}
				}
				plan.clusters[stageLoad] = orDefault(flagValue(cmd, "--name|-n"), "kind")
			case engineBuild.MatchString(cmd):
				mark(stageBuild, n)
				plan.images[stageBuild] = flagValue(cmd, "-t|--tag")
			case kubectlApply.MatchString(cmd), kustomizePipe.MatchString(cmd), helmInstall.MatchString(cmd):
				mark(stageDeploy, n)
			case runsTests(cmd):
				mark(stageTests, n)
			case makeCall.MatchString(cmd):
				args := strings.Fields(makeCall.FindStringSubmatch(cmd)[1])
				// make's command line wins, then the environment over
				// a ?= default, then the Makefile.
				img := mk.vars["IMG"]
				if v, ok := env["IMG"]; ok && (img == "" || mk.weak["IMG"]) {
					img = v
				}
				var targets []string
				for _, a := range args {
					if v, ok := strings.CutPrefix(a, "IMG="); ok {
						img = strings.Trim(v, `"'`)
					} else if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
						targets = append(targets, a)
					}
				}
				for _, t := range targets {
					switch {
					case t == "docker-build" || t == "podman-build" || slices.ContainsFunc(mk.recipes[t], engineBuild.MatchString):
						mark(stageBuild, n)
						plan.images[stageBuild] = img
					case t == "deploy":
						mark(stageDeploy, n)
						plan.images[stageDeploy] = img
					case slices.ContainsFunc(mk.recipes[t], runsTests):
						mark(stageTests, n)
					}
				}
			}
		}
	}
	return plan
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func runCIWorkflow(_ context.Context, c *Context, p *workflowParams) Outcome {
	dir := c.ProjectDir()
	if dir == "" {
		return skip("no project directory to read the workflow from (pass --project DIR)")
	}
	wfs, bad, err := ghworkflow.Load(dir)
	if err != nil {
		return errorf("reading %s: %v", ghworkflow.Dir, err)
	}
	expected := "a workflow on push or pull_request whose job " + strings.Join(stageOrder, ", then ")
	if len(wfs) == 0 {
		out := fail("%s has no workflow", ghworkflow.Dir)
		if len(bad) > 0 {
			out = fail("no workflow in %s could be read: %s", ghworkflow.Dir, strings.Join(bad, "; "))
		}
		out.Expected = expected
		return out
	}
	mk := readMakefile(dir)
	var best *jobPlan
	var bestTriggered bool
	for _, wf := range wfs {
		triggered := slices.Contains(wf.On, "push") || slices.Contains(wf.On, "pull_request")
		for _, job := range wf.Jobs {
			plan := planJob(wf, job, mk, p)
			if best == nil || plan.reached() > best.reached() || (plan.reached() == best.reached() && triggered && !bestTriggered) {
				best, bestTriggered = plan, triggered
			}
		}
	}
	where := fmt.Sprintf("%s, job %s", best.file, best.job)
	out := Outcome{Expected: expected}
	if n := best.reached(); n < len(stageOrder) {
		missing := stageOrder[n]
		out = fail("no job of the workflows %s and then %s: the closest, %s, stops there", strings.Join(stageOrder[:n], ", "), missing, where)
		if n == 0 {
			out = fail("no workflow job %s (looked in %s)", stageCluster, strings.Join(fileNames(wfs), ", "))
		}
		out.Expected = expected
		return out
	}
	if !bestTriggered {
		out = fail("%s does every stage, but its workflow runs neither on push nor on pull_request", where)
		out.Expected = expected
		return out
	}
	built, loaded, deployed := best.images[stageBuild], best.images[stageLoad], best.images[stageDeploy]
	if built != "" && loaded != "" && built != loaded && !strings.Contains(built+loaded, "$") {
		out = fail("%s builds the image %s but loads %s into kind: the cluster never gets the image it runs", where, built, loaded)
		out.Expected = expected
		return out
	}
	if deployed != "" && loaded != "" && deployed != loaded && !strings.Contains(deployed+loaded, "$") {
		out = fail("%s loads the image %s into kind but deploys %s: the operator's pod cannot pull it", where, loaded, deployed)
		out.Expected = expected
		return out
	}
	if a, b := best.clusters[stageCluster], best.clusters[stageLoad]; a != "" && b != "" && a != b {
		out = fail("%s creates the kind cluster %q but loads the image into %q (kind load --name)", where, a, b)
		out.Expected = expected
		return out
	}
	steps := make([]string, len(stageOrder))
	for i, s := range stageOrder {
		steps[i] = fmt.Sprintf("%s (step %d)", s, best.at[s])
	}
	out = pass("%s %s", where, strings.Join(steps, ", "))
	if len(best.waits) > 0 && p.Uninstalled != nil {
		out.Status = report.Warn
		out.Message += fmt.Sprintf("; but it waits for %s, which nothing in it installs (%s): %s", p.Uninstalled.Name, best.waits[0], p.Uninstalled.Why)
	}
	return out
}

func fileNames(wfs []ghworkflow.Workflow) []string {
	var out []string
	for _, wf := range wfs {
		if !slices.Contains(out, wf.File) {
			out = append(out, wf.File)
		}
	}
	return out
}
