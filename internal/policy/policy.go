// Package policy is an instructor's grading policy (`labctl grade --policy
// FILE`): per lab, how strict each step is (fail, warn, or hidden from the
// students), how many points each task is worth, and how the course's own
// known bugs are treated. Whatever it does not mention stays as the lab's
// YAML says.
package policy

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/userr"
)

// Policy is one policy file.
//
//	name: Spring 2027, strict
//	labs:
//	  lab-8.2:
//	    points: {"4.2": 15, cleanup: 0}
//	    steps: {pending-database-not-found: fail, backup-logged: hidden}
//	    bugs: {B32: fail}
//	  lab-3.4:
//	    bugs: {B1: fail}
type Policy struct {
	// Name is what the gradebook and each student's feedback say was
	// applied.
	Name string         `json:"name"`
	Labs map[string]Lab `json:"labs"`
}

// Lab is the policy for one lab.
type Lab struct {
	// Points replaces tasks' points.
	Points map[string]int `json:"points,omitempty"`
	// Steps sets assertions' severity by step id: fail, warn or hidden
	// (counts as usual, but the students' feedback withholds its evidence).
	Steps map[string]Severity `json:"steps,omitempty"`
	// Bugs sets the severity of the steps that probe a named bug of the
	// course's own solutions (course catalogue §5, e.g. B1), which the
	// lab reports leniently (warn) by default.
	Bugs map[string]Severity `json:"bugs,omitempty"`
}

// Severity of a step under a policy.
type Severity string

// Severities.
const (
	Fail   Severity = "fail"
	Warn   Severity = "warn"
	Hidden Severity = "hidden"
)

// Load reads a policy file.
func Load(path string) (*Policy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, userr.Usage(fmt.Sprintf("cannot read the policy: %v", err), "pass --policy with a YAML file")
	}
	var p Policy
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		return nil, userr.Usage(fmt.Sprintf("%s is not a grading policy: %v", path, err), "see `labctl grade --help` for its format")
	}
	if strings.TrimSpace(p.Name) == "" {
		return nil, userr.Usage(path+" has no name", "give the policy a name: it is shown in every student's feedback")
	}
	return &p, nil
}

// ApplyFile loads the policy at path and applies it to lab: the lab as
// graded under it and the policy's name. An empty path is no policy: lab
// itself and "".
func ApplyFile(path string, lab *labs.Lab) (*labs.Lab, string, error) {
	if path == "" {
		return lab, "", nil
	}
	p, err := Load(path)
	if err != nil {
		return nil, "", err
	}
	out, err := p.Apply(lab)
	if err != nil {
		return nil, "", err
	}
	return out, p.Name, nil
}

// Apply returns a copy of lab with the policy applied, and an error that
// names every entry that does not fit the lab (unknown task, step or bug,
// bad severity or points). A policy without an entry for the lab returns
// it unchanged.
func (p *Policy) Apply(lab *labs.Lab) (*labs.Lab, error) {
	lp, ok := p.Labs[lab.ID]
	if !ok {
		return lab, nil
	}
	out := *lab
	out.Tasks = slices.Clone(lab.Tasks)
	out.Scenarios = make([]labs.Scenario, len(lab.Scenarios))
	for i, sc := range lab.Scenarios {
		sc.Steps = slices.Clone(sc.Steps)
		out.Scenarios[i] = sc
	}
	var errs []error
	for _, id := range sortedKeys(lp.Points) {
		n := lp.Points[id]
		i := slices.IndexFunc(out.Tasks, func(t labs.Task) bool { return t.ID == id })
		switch {
		case i < 0:
			errs = append(errs, fmt.Errorf("points: %s has no task %s", lab.ID, id))
		case n < 0:
			errs = append(errs, fmt.Errorf("points: task %s: %d is negative", id, n))
		default:
			out.Tasks[i].Points = n
		}
	}
	steps := map[string]*labs.Step{}
	bugs := map[string][]*labs.Step{}
	// stuck: the waits that excuse a course bug's signature (labs.Stuck).
	stuck := map[string][]*labs.Step{}
	for i := range out.Scenarios {
		for j := range out.Scenarios[i].Steps {
			st := &out.Scenarios[i].Steps[j]
			if st.IsAssertion() {
				steps[st.ID] = st
				if st.Bug != "" {
					bugs[st.Bug] = append(bugs[st.Bug], st)
				}
			}
			if st.Expect != nil && st.Expect.Stuck != nil {
				stuck[st.Expect.Stuck.Bug] = append(stuck[st.Expect.Stuck.Bug], st)
			}
		}
	}
	set := func(where string, st *labs.Step, sev Severity) {
		switch sev {
		case Fail:
			st.Severity, st.Hidden = "", false
		case Warn:
			st.Severity, st.Hidden = "warn", false
		case Hidden:
			st.Hidden = true
		default:
			errs = append(errs, fmt.Errorf("%s: severity %q: use fail, warn or hidden", where, sev))
		}
	}
	for _, bug := range sortedKeys(lp.Bugs) {
		if len(bugs[bug]) == 0 && len(stuck[bug]) == 0 {
			errs = append(errs, fmt.Errorf("bugs: no step of %s probes course bug %s", lab.ID, bug))
		}
		for _, st := range bugs[bug] {
			set("bugs: "+bug, st, lp.Bugs[bug])
		}
		for _, st := range stuck[bug] {
			switch lp.Bugs[bug] {
			case Fail: // the wait no longer excuses the bug: it fails, and so does what needs it
				e := *st.Expect
				e.Stuck = nil
				st.Expect = &e
			case Hidden:
				st.Hidden = true
			case Warn:
			default:
				set("bugs: "+bug, st, lp.Bugs[bug]) // reports the bad severity
			}
		}
	}
	for _, id := range sortedKeys(lp.Steps) {
		st, ok := steps[id]
		if !ok {
			errs = append(errs, fmt.Errorf("steps: %s has no check %s (check ids are those of `labctl verify -o json`)", lab.ID, id))
			continue
		}
		set("steps: "+id, st, lp.Steps[id])
	}
	if err := errors.Join(errs...); err != nil {
		return nil, userr.Usage(fmt.Sprintf("policy %q does not fit %s: %s", p.Name, lab.ID, strings.ReplaceAll(err.Error(), "\n", "; ")), "fix the policy file")
	}
	return &out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
