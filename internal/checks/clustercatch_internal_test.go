package checks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/report"
)

// permutations are every order of the control and n mutants.
func permutations(n int) [][]int {
	items := []int{controlRun}
	for i := range n {
		items = append(items, i)
	}
	var out [][]int
	var permute func(k int)
	permute = func(k int) {
		if k == len(items) {
			out = append(out, append([]int(nil), items...))
			return
		}
		for i := k; i < len(items); i++ {
			items[k], items[i] = items[i], items[k]
			permute(k + 1)
			items[k], items[i] = items[i], items[k]
		}
	}
	permute(0)
	return out
}

// The catch check's verdict is the same in every order the control and
// the mutants can be drawn in: the same tests, the same score and the
// same message.
func TestJudgeMutantsDoesNotDependOnTheOrder(t *testing.T) {
	mutants := []operatorMutant{
		{Name: "no-scaling", Doc: "never scales the StatefulSet"},
		{Name: "finalizer-kept", Doc: "never removes its finalizer"},
		{Name: "no-service", Doc: "never creates the Service"},
	}
	passed := mutantRun{r: suiteRun{run: &gobuild.TestRun{Passed: []string{"pkg TestIntegration"}}}}
	failed := func(fired bool) mutantRun {
		return mutantRun{fired: fired, r: suiteRun{run: &gobuild.TestRun{Failed: []string{"pkg TestIntegration"},
			Output: map[string][]string{"pkg TestIntegration": {"databases \"fixed\" already exists"}}}}}
	}
	undecided := failed(false)
	undecided.undecided = "the tests failed against the mutant before the operator even tried what it refuses, twice"
	for _, c := range []struct {
		name    string
		control mutantRun
		each    []mutantRun
		want    report.Result
		says    string
	}{
		{"tests that catch every mutant", passed, []mutantRun{failed(true), failed(true), failed(true)}, report.Pass, "fail against each of 3 mutant(s)"},
		{"a fixed name: every run after the first fails", failed(false), []mutantRun{undecided, undecided, undecided}, report.Fail, "then failed when run once more with no mutant alive"},
		{"a fixed name, but one mutant fired", failed(false), []mutantRun{failed(true), undecided, undecided}, report.Fail, "then failed when run once more with no mutant alive"},
		{"two survivors, named in the mutants' order", passed, []mutantRun{passed, failed(true), passed}, report.Fail,
			"the tests pass against an operator that never scales the StatefulSet (the tests never made it do that); and against an operator that never creates the Service (the tests never made it do that)"},
		{"one mutant cannot be told", passed, []mutantRun{failed(true), undecided, failed(true)}, report.Error, "whether they catch it cannot be told"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var first *Outcome
			for _, order := range permutations(len(mutants)) {
				runs := map[string]int{}
				out := judgeMutants(mutants, order, "expected", func(m *operatorMutant) mutantRun {
					if m == nil {
						runs["control"]++
						return c.control
					}
					runs[m.Name]++
					for i := range mutants {
						if mutants[i].Name == m.Name {
							return c.each[i]
						}
					}
					panic(m.Name)
				})
				assert.LessOrEqual(t, runs["control"], 1, "the control runs once at most (order %v)", order)
				assert.Equal(t, c.want, out.Status, "order %v: %s", order, out.Message)
				assert.Contains(t, out.Message, c.says, "order %v", order)
				if first == nil {
					first = &out
					continue
				}
				require.Equal(t, first.Message, out.Message, "order %v", order)
			}
		})
	}
}
