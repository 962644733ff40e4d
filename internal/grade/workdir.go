package grade

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/local"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/fslock"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/userr"
)

// A grading run's work directory holds every submission's copy, cluster
// keys and kubeconfigs (a hundred MB or more). It lives under labctl's
// state directory, readable by the grader alone, never in the shared
// $TMPDIR; a grader that is killed cannot remove it, so the next grader
// does, recognising a dead owner by the record (pid and start time) each
// run writes into its directory.

// ownerFile, in a work directory, records the grader that owns it.
const ownerFile = "grader.json"

// runPrefix starts the name of every work directory under WorkRoot.
const runPrefix = "run-"

// unownedGrace is how long a work directory may lack its owner record: a
// grader writes it right after creating the directory, so one older than
// this without a record belongs to a grader killed in between.
const unownedGrace = time.Minute

// WorkRoot is where grading runs keep their work directories:
// $XDG_STATE_HOME/labctl/grade (default ~/.local/state/labctl/grade).
func WorkRoot() string { return cluster.StateDir("grade") }

// newWorkDir creates a run's work directory under root (mode 0700) and
// records this process as its owner.
func newWorkDir(root string) (string, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("cannot create the grading work directory: %w", err)
	}
	dir, err := os.MkdirTemp(root, runPrefix) // mode 0700
	if err != nil {
		return "", fmt.Errorf("cannot create the grading work directory: %w", err)
	}
	start, err := proc.StartTime(os.Getpid())
	if err == nil {
		err = proc.SaveRecord(filepath.Join(dir, ownerFile), proc.Record{PID: os.Getpid(), Start: start})
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("cannot record the grader in its work directory: %w", err)
	}
	return dir, nil
}

// Cleaned is what CleanStale removed.
type Cleaned struct {
	// Runs are the work directories removed.
	Runs []string
	// Owners are the pids of their graders (0: unknown).
	Owners []int
	// Bytes is the size of what was removed.
	Bytes int64
	// Killed counts the submissions' processes still running, killed.
	Killed int
	// Problems says what could not be stopped or removed (those
	// directories are kept, for the next run to try again).
	Problems []string
}

// String is the one line a grader prints about its cleaning.
func (c Cleaned) String() string {
	if len(c.Runs) == 0 && len(c.Problems) == 0 {
		return ""
	}
	var b strings.Builder
	if len(c.Runs) > 0 {
		var owners []string
		for _, pid := range c.Owners {
			if pid > 0 {
				owners = append(owners, fmt.Sprint(pid))
			}
		}
		fmt.Fprintf(&b, "note: cleaned up %d grading run(s) left by a grader that is gone", len(c.Runs))
		if len(owners) > 0 {
			fmt.Fprintf(&b, " (pid %s)", strings.Join(owners, ", "))
		}
		fmt.Fprintf(&b, ": stopped their clusters and managers")
		if c.Killed > 0 {
			fmt.Fprintf(&b, ", killed %d leftover process(es)", c.Killed)
		}
		fmt.Fprintf(&b, ", removed %s from %s", formatBytes(c.Bytes), filepath.Dir(c.Runs[0]))
	}
	if len(c.Problems) > 0 {
		if b.Len() > 0 {
			b.WriteString("; ")
		} else {
			b.WriteString("warning: ")
		}
		fmt.Fprintf(&b, "could not clean up after a dead grader: %s", strings.Join(c.Problems, "; "))
	}
	return b.String()
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d kB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// CleanStale removes the work directories under root whose grader no
// longer runs, after stopping what it left running there as its teardown
// would have: each submission's cluster and manager (by the records in
// their state, never by a command-line search) and anything still running
// as the submission's sandbox user. Directories of live graders are
// left alone, so two graders can run at once.
func CleanStale(ctx context.Context, root string) (Cleaned, error) {
	var c Cleaned
	// Absolute, as the grader's own work path was: a sandbox's uid is
	// derived from it.
	root, err := filepath.Abs(root)
	if err != nil {
		return c, err
	}
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	// Two graders starting together must not both tear down one run.
	unlock, err := fslock.Lock(ctx, filepath.Join(root, ".clean.lock"))
	if err != nil {
		return c, err
	}
	defer unlock()
	for _, run := range staleRuns(root, time.Now()) {
		owner, _ := readOwner(run)
		size := dirSize(run)
		killed, problems := stopRun(ctx, run)
		c.Killed += killed
		if len(problems) > 0 {
			c.Problems = append(c.Problems, problems...)
			continue
		}
		if err := os.RemoveAll(run); err != nil {
			c.Problems = append(c.Problems, fmt.Sprintf("cannot remove %s: %v", run, err))
			continue
		}
		c.Runs = append(c.Runs, run)
		c.Owners = append(c.Owners, owner.PID)
		c.Bytes += size
	}
	return c, nil
}

// staleRuns lists the work directories under root whose grader is gone.
func staleRuns(root string, now time.Time) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var stale []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		owner, err := readOwner(dir)
		if err != nil {
			// No record: the grader may be between creating the
			// directory and writing it.
			info, ierr := e.Info()
			if ierr != nil || now.Sub(info.ModTime()) < unownedGrace {
				continue
			}
		} else if owner.Alive() {
			continue
		}
		stale = append(stale, dir)
	}
	return stale
}

func readOwner(dir string) (proc.Record, error) {
	recs := proc.LoadRecords(filepath.Join(dir, ownerFile))
	if len(recs) == 0 {
		return proc.Record{}, errors.New("no owner record")
	}
	return recs[0], nil
}

// stopRun stops what the submissions of a dead grader's run left running.
func stopRun(ctx context.Context, run string) (killed int, problems []string) {
	entries, err := os.ReadDir(run)
	if err != nil {
		return 0, []string{err.Error()}
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == tempDirName {
			continue
		}
		studentDir := filepath.Join(run, e.Name())
		uid := noSandbox
		if _, err := os.Stat(filepath.Join(studentDir, "sandbox")); err == nil {
			uid = sandbox.UIDFor(run + "\x00" + e.Name())
		}
		prov := &local.Provider{StateRoot: clustersDir(studentDir), Operators: deploy.AsProcess{}}
		n, notes := stopSubmission(ctx, prov, nil, uid)
		killed += n
		problems = append(problems, notes...)
	}
	return killed, problems
}

// noSandbox is the uid stopSubmission gets for a submission that ran
// unconfined (nothing runs as a uid of its own).
const noSandbox = -1

// stopSubmission stops a submission's manager and cluster and kills
// anything left running as its sandbox's uid; it returns how many such
// processes it killed and what went wrong. Supervisors are stopped first
// (each stops its manager; a sandboxed manager takes everything it started
// with it, being its pid namespace's first process), so a manager killed
// directly is not restarted; then the cluster (whose Down also stops the
// supervisors recorded in its state, for a grader that died before it
// knew its cluster).
func stopSubmission(ctx context.Context, prov *local.Provider, c *cluster.Cluster, uid int) (killed int, problems []string) {
	if c != nil {
		if err := c.StopOperators(ctx); err != nil {
			problems = append(problems, userr.Message(err))
		}
	}
	if err := prov.Down(ctx, clusterName); err != nil && !errors.Is(err, cluster.ErrNotFound) {
		problems = append(problems, userr.Message(err))
	}
	if uid != noSandbox {
		killed = proc.KillUID(uid)
	}
	return killed, problems
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// tempDirName, in a work directory, is the TMPDIR (and GOTMPDIR) of the
// grader and every process it starts while it grades: go builds, the
// checks' compiles and the control plane write their temporary files
// there, so a killed grader leaves none in the shared $TMPDIR.
const tempDirName = "tmp"

// useTempDir points TMPDIR and GOTMPDIR at dir (created, mode 0700) for
// this process and its children, until the returned func restores them.
func useTempDir(dir string) (restore func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var undo []func()
	for _, v := range []string{"TMPDIR", "GOTMPDIR"} {
		old, had := os.LookupEnv(v)
		if err := os.Setenv(v, dir); err != nil {
			return nil, err
		}
		undo = append(undo, func() {
			if had {
				_ = os.Setenv(v, old)
			} else {
				_ = os.Unsetenv(v)
			}
		})
	}
	return func() {
		for _, u := range undo {
			u()
		}
	}, nil
}
