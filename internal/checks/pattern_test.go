package checks

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A pattern is judged by what it accepts, not by its spelling: every
// expression equivalent to the lab's passes; each way students get it
// wrong fails with the shortest string it sorts differently, including
// those the lab's examples happen not to contain.
func TestPatternJudgedByMeaning(t *testing.T) {
	spec := &patternSpec{
		Accepts: []string{"10Gi", "500Mi", "1Gi"},
		Rejects: []string{"invalid", "10GB", "10", "Gi", "10gi", "10Gix"},
		Like:    `^[0-9]+(Gi|Mi)$`,
	}
	for _, ok := range []string{
		`^[0-9]+(Gi|Mi)$`,
		`^\d+(Gi|Mi)$`,
		`^[0-9]+[GM]i$`,
		`^[0-9][0-9]*(?:Gi|Mi)$`,
		`^(\d+Gi|\d+Mi)$`,
	} {
		assert.Empty(t, spec.judge(ok), ok)
	}
	for bad, says := range map[string]string{
		`[0-9]+(Gi|Mi)$`:      `accepts "x0Gi"`,   // no ^: anything before the number
		`^[0-9]+Gi|Mi$`:       `accepts`,          // the alternation takes the anchors apart
		`^[0-9]+(Gi|Mi|Ti)$`:  `accepts "0Ti"`,    // a unit the lab does not ask for
		`^[0-9]+(Gi|Mi)`:      `accepts "10Gix"`,  // no $: the examples catch it
		`^[0-9]+(Gi|Mi)\s*$`:  `accepts "0Gi "`,   // trailing blanks
		`^[1-9][0-9]*Gi$`:     `rejects "500Mi"`,  // only gibibytes
		`^[0-9]{1,3}(Gi|Mi)$`: `rejects "0500Mi"`, // at most three digits
	} {
		assert.Contains(t, spec.judge(bad), says, bad)
	}
}

// The search stays quick on a pattern that names many characters.
// BenchmarkPatternDifference measures the worst case a lab meets: two
// long DNS-name patterns that differ only in their first character class.
func BenchmarkPatternDifference(b *testing.B) {
	spec := &patternSpec{Like: `^[a-z]([-a-z0-9]*[a-z0-9])?(\.[a-z]([-a-z0-9]*[a-z0-9])?)*$`}
	for b.Loop() {
		spec.judge(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	}
}
