package honesty_test

import (
	"testing"
	"time"
)

// BenchmarkVerify measures `labctl verify` against the reference operator
// on the local provider, one lab at a time, as `make bench` reports it
// (targets: lab-8.2 and labs 4.1-4.4 ≤ 5s, lab-3.4 ≤ 10s of wall time):
//
//	go test -run '^$' -bench Verify -benchtime 3x ./internal/checks/honesty/
func BenchmarkVerify(b *testing.B) {
	dir := copyOperator(b, "")
	op := deployOperator(b, dir)
	waitGarbageCollector(b)
	for _, lab := range []string{"lab-8.2", "lab-3.4", "lab-4.1", "lab-4.2", "lab-4.3", "lab-4.4"} {
		b.Run(lab, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				start := time.Now()
				rep := verify(b, lab, op, dir)
				if failed := rep.FailedTasks(); len(failed) > 0 {
					b.Fatalf("the reference failed tasks %v of %s:\n%s", failed, lab, render(rep))
				}
				worst = max(worst, time.Since(start))
			}
			b.ReportMetric(worst.Seconds(), "max-s/verify")
		})
	}
}
