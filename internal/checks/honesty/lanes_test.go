//go:build unix

package honesty_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/testcluster"
)

// lanes is how many clusters TestHonesty's subtests are dealt out to. A
// lane spends much of a subtest waiting on its operator's progress; a
// second lane fills that idle time, and on a loaded machine its runnable
// threads win the suite a larger share of the CPU.
var lanes = flag.Int("honesty.lanes", 2, "clusters TestHonesty runs its subtests on, side by side")

// operatorlessStreams is how many of TestHonestyOperatorless's subtests
// run side by side, each in a slot of its own.
var operatorlessStreams = flag.Int("honesty.operatorless-streams", 2, "TestHonestyOperatorless's subtests run side by side")

// subtest is one of TestHonesty's subtests: its project is taken from the
// lane's build ahead and deployed on the lane's cluster (when it has an
// operator its lab needs running), then run judges it there.
type subtest struct {
	name    string
	project project
	run     func(t *testing.T, c *testcluster.Cluster, op *operator.Operator, dir string)
}

// deal gives the first lane first, then deals rest out to n lanes in turn,
// starting with the second lane (the first has first to run).
func deal[T any](first, rest []T, n int) [][]T {
	n = max(n, 1)
	out := make([][]T, n)
	out[0] = append(out[0], first...)
	for i, st := range rest {
		l := (i + 1) % n
		out[l] = append(out[l], st)
	}
	return out
}

// runLanes runs each lane's subtests in order on a cluster of its own, the
// lanes side by side: the first on the shared cluster, the others on
// clusters started here and stopped when their lane is done. Subtests keep
// their names (t.Run may be called from several goroutines), so -run
// selects them as before.
func runLanes(t *testing.T, lanes [][]subtest) {
	var wg sync.WaitGroup
	for i, lane := range lanes {
		wg.Go(func() {
			c := env
			if i > 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				started, stop, err := testcluster.Start(ctx, fmt.Sprintf("honesty-lane-%d", i+1))
				cancel()
				if err != nil {
					t.Errorf("lane %d: %v", i+1, err)
					return
				}
				defer stop()
				c = started
			}
			runLane(t, c, i, lane)
		})
	}
	wg.Wait()
	times.write(t)
}

// runLane runs a lane's subtests in order on c, each one's project built
// while the one before it is verified (in the lane's pair of slots).
func runLane(t *testing.T, c *testcluster.Cluster, i int, lane []subtest) {
	order := make([]project, len(lane))
	for j, st := range lane {
		order[j] = st.project
	}
	next := newAhead(order, 2*i)
	defer next.stop()
	for _, st := range lane {
		t.Run(st.name, func(t *testing.T) {
			start := time.Now()
			dir := next.take(t, st.project)
			took := time.Now()
			op := deployIfOperator(t, c, st.project, dir)
			deployed := time.Now()
			next.buildNext()
			defer times.add(t, i+1, took.Sub(start), deployed.Sub(took), deployed)
			st.run(t, c, op, dir)
		})
	}
}

// times keeps each subtest's phases, for LABCTL_HONESTY_TIMES: where the
// suite's minutes go (the build it waited for, the deploy, the verify).
var times timeTable

type timeTable struct {
	mu   sync.Mutex
	rows []string
}

// add records t's phases when it ends: judging ran from judged until now.
func (tt *timeTable) add(t *testing.T, lane int, wait, deploy time.Duration, judged time.Time) {
	row := fmt.Sprintf("%d\t%s\t%.1f\t%.1f\t%.1f\t%t", lane, t.Name(), wait.Seconds(), deploy.Seconds(), time.Since(judged).Seconds(), t.Failed())
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.rows = append(tt.rows, row)
}

// write appends the rows kept so far to the file LABCTL_HONESTY_TIMES
// names, if any: lane (0, -1, …: TestHonestyOperatorless's streams),
// subtest, seconds waiting for its build, deploying, judging, failed.
func (tt *timeTable) write(t *testing.T) {
	path := os.Getenv("LABCTL_HONESTY_TIMES")
	if path == "" {
		return
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if len(tt.rows) == 0 {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = fmt.Fprintln(f, strings.Join(tt.rows, "\n"))
		err = errors.Join(err, f.Close())
	}
	tt.rows = nil // written: the next test writes its own
	if err != nil {
		t.Logf("LABCTL_HONESTY_TIMES: %v", err)
	}
}
