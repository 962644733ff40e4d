//go:build unix

package honesty_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/reference"
)

// project is what one subtest runs: a reference project ("" is the
// Database operator) with a patch applied ("" for none). Operatorless:
// the lab judges the project's files and tests alone, so no manager is
// built or deployed.
type project struct {
	name, patch  string
	operatorless bool
}

// ahead gets the next subtest's project ready while the current one is
// verified. The copy and the patch take milliseconds and are done on the
// spot; the manager's build (a compile and a link: about a third of a
// subtest) runs in the background at the lowest CPU priority, so it only
// takes cycles the verify leaves idle and does not load its timing checks.
// The two projects live in two slots that alternate, each at a fixed path
// (see workDir); each lane of TestHonesty has a pair of its own. The build leaves the binary in labctl's manager cache,
// where the subtest's deploy finds it.
type ahead struct {
	order []project // the subtests' projects, in the order they run
	first int       // the first of the pair of slots this ahead alternates
	slot  int       // the slot of the project taken last
	taken int       // its index in order (-1: not in it)
	next  *building
}

// building is a project copied into a slot whose manager is being built.
type building struct {
	project project
	slot    int
	dir     string
	cancel  context.CancelFunc
	done    chan struct{}
}

// newAhead alternates the slots first and first+1.
func newAhead(order []project, first int) *ahead {
	return &ahead{order: order, first: first, slot: first + 1, taken: -1}
}

// other is the slot of the pair that is not s.
func (a *ahead) other(s int) int { return a.first + 1 - (s - a.first) }

// take returns the directory of p, ready to deploy.
func (a *ahead) take(t testing.TB, p project) string {
	t.Helper()
	var dir string
	if n := a.next; n != nil && n.project == p {
		select {
		case <-n.done:
			t.Logf("built ahead")
		default:
			t.Logf("the build ahead had not finished: stopped")
			// Still building: on a loaded machine an idle-priority build
			// would crawl, so it is stopped and the deploy builds at full
			// priority (the Go cache keeps the packages already compiled).
			n.cancel()
			<-n.done
		}
		n.cancel()
		dir, a.slot = n.dir, n.slot
	} else {
		a.stop() // a subtest skipped by -run: its build is not wanted
		a.slot = a.other(a.slot)
		var err error
		dir, err = copyInto(p.name, p.patch, a.slot)
		require.NoError(t, err)
	}
	a.next = nil
	// The same project can run twice (a course variant judged against two
	// labs): it is the first one after the project taken last.
	if i := slices.Index(a.order[a.taken+1:], p); i >= 0 {
		a.taken += 1 + i
	} else {
		a.taken = slices.Index(a.order, p)
	}
	return dir
}

// buildNext starts on the project after the one taken last, once that one
// is deployed: its own build is done, so the build ahead competes with the
// verify alone.
func (a *ahead) buildNext() {
	if a.next == nil && a.taken >= 0 && a.taken+1 < len(a.order) {
		a.next = a.start(a.order[a.taken+1], a.other(a.slot))
	}
}

// start copies p into slot and builds its manager in the background. A
// project that cannot be copied, patched or built is left to its own
// subtest, which does it again and says why.
func (a *ahead) start(p project, slot int) *building {
	dir, err := copyInto(p.name, p.patch, slot)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &building{project: p, slot: slot, dir: dir, cancel: cancel, done: make(chan struct{})}
	ref, err := reference.Lookup(p.name)
	if err != nil || !ref.Operator || p.operatorless {
		close(b.done)
		return b
	}
	go func() {
		defer close(b.done)
		if proj, err := deploy.LoadProject(dir); err == nil {
			_, _, _ = deploy.BuildManager(ctx, proj, deploy.BuildOptions{Nice: 19})
		}
	}()
	return b
}

// stop ends the build ahead, if any, and forgets it.
func (a *ahead) stop() {
	if a.next != nil {
		a.next.cancel()
		<-a.next.done
		a.next = nil
	}
}
