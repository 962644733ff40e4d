//go:build unix

package honesty_test

import (
	"context"
	"flag"
	"fmt"
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
func deal(first, rest []subtest, n int) [][]subtest {
	n = max(n, 1)
	out := make([][]subtest, n)
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
			dir := next.take(t, st.project)
			op := deployIfOperator(t, c, st.project, dir)
			next.buildNext()
			st.run(t, c, op, dir)
		})
	}
}
