package checks

import (
	"slices"

	"github.com/labctl/labctl/internal/labs"
)

// MachineTasks are a lab's tasks that only ask about the student's own
// machine: every assertion of theirs is an OwnMachine check (lab 6.1's
// ginkgo, setup-envtest, dlv).
func MachineTasks(lab *labs.Lab) []string {
	machine, other := map[string]bool{}, map[string]bool{}
	for _, sc := range lab.Scenarios {
		for _, st := range sc.Steps {
			own := false
			if st.Check != nil {
				def, ok := registry[st.Check.Name]
				own = ok && def.OwnMachine
			}
			for _, id := range st.Tasks {
				if own {
					machine[id] = true
				} else {
					other[id] = true
				}
			}
		}
	}
	var out []string
	for _, t := range lab.Tasks {
		if machine[t.ID] && !other[t.ID] {
			out = append(out, t.ID)
		}
	}
	return out
}

// ForGrading is the lab as a grader judges it, on a machine that is not
// the student's (labctl grade, a Classroom runner): without its
// MachineTasks, whose points are then not in its total, and without the
// steps that give evidence only for them. The lab itself is not changed.
func ForGrading(lab *labs.Lab) *labs.Lab {
	machine := MachineTasks(lab)
	if len(machine) == 0 {
		return lab
	}
	out := *lab
	out.Tasks = slices.DeleteFunc(slices.Clone(lab.Tasks), func(t labs.Task) bool { return slices.Contains(machine, t.ID) })
	out.Scenarios = nil
	for _, sc := range lab.Scenarios {
		sc.Steps = slices.DeleteFunc(slices.Clone(sc.Steps), func(st labs.Step) bool {
			return len(st.Tasks) > 0 && !slices.ContainsFunc(st.Tasks, func(id string) bool { return !slices.Contains(machine, id) })
		})
		if len(sc.Steps) > 0 {
			out.Scenarios = append(out.Scenarios, sc)
		}
	}
	return &out
}
