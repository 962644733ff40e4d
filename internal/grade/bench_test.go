package grade_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/report"
)

// BenchmarkGradeClass grades the ten submissions of
// testdata/grade/bench-class.csv end to end (build, cluster, deploy,
// verify, teardown; --jobs default) and reports wall time per submission
// (amortised) and in total:
//
//	LABCTL_BIN_DIR=$(cat .controlplane-dir) go test -run '^$' -bench GradeClass -benchtime 1x ./internal/grade/
//
// Sources are fresh, so every manager is linked, as for a real class; set
// LABCTL_BENCH_REGRADE=1 to stamp them as the test does and measure a
// re-grade (managers reused from labctl's cache).
func BenchmarkGradeClass(b *testing.B) {
	lab := loadLab(b, "lab-8.2")
	class := readClass(b, "bench-class.csv")
	regrade := os.Getenv("LABCTL_BENCH_REGRADE") == "1"
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root := b.TempDir()
		subs := materialize(b, filepath.Join(root, "class"), class, regrade)
		cleanCache := forgetNewManagers(b)
		s, _, stderr := iostreams.Test(false)
		opts := grade.Options{Lab: lab, Submissions: subs, Timeout: 5 * time.Minute, OutDir: filepath.Join(root, "out"), Streams: s, Binaries: binaries}
		b.StartTimer()
		start := time.Now()
		gb, err := grade.Run(context.Background(), opts)
		total := time.Since(start)
		b.StopTimer()
		if !regrade {
			cleanCache()
		}
		if err != nil {
			b.Fatalf("%v\n%s", err, stderr)
		}
		b.ReportMetric(total.Seconds()/float64(len(subs)), "s/submission")
		b.ReportMetric(total.Seconds(), "s/total")
		b.ReportMetric(float64(grade.DefaultJobs()), "jobs")
		b.Log(phaseTable(gb, total))
		b.StartTimer()
	}
}

// lost names the checks that did not pass, by task.
func lost(s *report.GradedSubmission) string {
	var out []string
	if s.Report == nil {
		return " -"
	}
	for _, t := range s.Report.Tasks {
		for _, c := range t.Checks {
			if !c.Status.Passed() {
				out = append(out, t.ID+"/"+c.ID)
			}
		}
	}
	return " " + strings.Join(out, ",")
}

// phaseTable lists each submission's wall time and phases.
func phaseTable(gb *report.Gradebook, total time.Duration) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d submissions in %s (%.1f s each, amortised)\n", len(gb.Submissions), total.Round(100*time.Millisecond), total.Seconds()/float64(len(gb.Submissions)))
	for _, s := range gb.Submissions {
		fmt.Fprintf(&sb, "  %-26s %6s/%s %-13s %5.1fs  %s  lost:%s\n", s.Student, report.FormatPoints(s.Score), report.FormatPoints(s.MaxPoints), s.Outcome,
			time.Duration(s.Duration).Seconds(), phases(s), lost(s))
	}
	return sb.String()
}
