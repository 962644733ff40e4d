//go:build unix

package honesty_test

import (
	"testing"
	"time"

	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/reference"
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

// BenchmarkVerifyFirstLabs measures labs 1.4 (no operator: the Website CRD),
// 2.4 and 3.1 (the Hello World operator) the same way (target ≤ 5s each):
//
//	go test -run '^$' -bench VerifyFirstLabs -benchtime 3x ./internal/checks/honesty/
func BenchmarkVerifyFirstLabs(b *testing.B) {
	hello := copyProject(b, reference.Hello, "")
	op := deployOperator(b, hello)
	website := copyProject(b, reference.Website, "")
	for _, run := range []struct {
		lab string
		op  *operator.Operator
		dir string
	}{{"lab-1.4", nil, website}, {"lab-2.4", op, hello}, {"lab-3.1", op, hello}} {
		b.Run(run.lab, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				start := time.Now()
				rep := verify(b, run.lab, run.op, run.dir)
				if failed := rep.FailedTasks(); len(failed) > 0 {
					b.Fatalf("the reference failed tasks %v of %s:\n%s", failed, run.lab, render(rep))
				}
				worst = max(worst, time.Since(start))
			}
			b.ReportMetric(worst.Seconds(), "max-s/verify")
		})
	}
}
