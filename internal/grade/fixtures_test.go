package grade_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labctl/labctl/internal/grade"
	"github.com/labctl/labctl/internal/reference"
	"github.com/labctl/labctl/internal/sandbox"
)

// repoRoot is the labctl repository (tests run in internal/grade).
const repoRoot = "../.."

// fixture is one submission of the test class: the reference operator with
// patches applied (testdata/grade/*.patch, or the verify mutants).
type fixture struct {
	Student string
	Patches []string // relative to the repository root
	// Git: serve it from a git repository (roster repo + ref), not a dir.
	Git bool
}

// readClass reads testdata/grade/class.csv: student,patches,source where
// patches are separated by spaces and source is dir or git.
func readClass(t testing.TB, name string) []fixture {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "testdata", "grade", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comment = '#'
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []fixture
	for _, rec := range recs[1:] {
		fx := fixture{Student: rec[0], Git: rec[2] == "git"}
		fx.Patches = strings.Fields(rec[1])
		out = append(out, fx)
	}
	return out
}

// materialize writes each fixture under root and returns the roster
// submissions. With stamp, every file's modification time is derived from
// its content, so a fixture unchanged since the last run has the same
// source fingerprint and its built manager is reused (deploy caches
// managers by path, size and mtime); a patched file gets its own. Without
// it the sources are new, and every manager is built.
func materialize(t testing.TB, root string, class []fixture, stamp bool) []grade.Submission {
	t.Helper()
	var subs []grade.Submission
	for _, fx := range class {
		dir := filepath.Join(root, fx.Student)
		if err := os.CopyFS(dir, reference.Source); err != nil {
			t.Fatal(err)
		}
		for _, p := range fx.Patches {
			abs, err := filepath.Abs(filepath.Join(repoRoot, p))
			if err != nil {
				t.Fatal(err)
			}
			run(t, dir, "git", "apply", "--whitespace=nowarn", abs)
		}
		if stamp {
			stampMtimes(t, dir)
		} else {
			// New sources: a unique line, so that even a clone (whose
			// times labctl derives from content) builds anew.
			f, err := os.OpenFile(filepath.Join(dir, "cmd", "main.go"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(f, "\n// submitted %s %d\n", fx.Student, time.Now().UnixNano())
			f.Close()
		}
		s := grade.Submission{Student: fx.Student, Dir: dir}
		if fx.Git {
			run(t, dir, "git", "init", "--quiet", "--initial-branch=main")
			run(t, dir, "git", "add", "-A")
			run(t, dir, "git", "-c", "user.name=student", "-c", "user.email=student@example.edu", "commit", "--quiet", "-m", "lab 8.2")
			run(t, dir, "git", "tag", "submitted")
			s = grade.Submission{Student: fx.Student, Repo: dir, Ref: "submitted"}
		}
		subs = append(subs, s)
	}
	return subs
}

func stampMtimes(t testing.TB, dir string) {
	t.Helper()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		at := base.Add(time.Duration(binary.BigEndian.Uint32(sum[:4])) * time.Second)
		return os.Chtimes(p, at, at)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// forgetNewManagers returns a function that removes the managers built
// into labctl's cache since it was called (fresh fixture sources would
// otherwise leave ~80 MB each there on every run).
func forgetNewManagers(t testing.TB) func() {
	t.Helper()
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		var err error
		if base, err = os.UserCacheDir(); err != nil {
			return func() {}
		}
	}
	dir := filepath.Join(base, "labctl", "managers")
	before := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		before[e.Name()] = true
	}
	return func() {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if !before[e.Name()] {
				_ = os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
}

func run(t testing.TB, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// needBox skips a test on a machine with no sandbox, and in -short runs
// when heavy says what makes it long ("" for a quick one).
func needBox(t testing.TB, heavy string) {
	t.Helper()
	if heavy != "" && testing.Short() {
		t.Skip(heavy)
	}
	if sup := sandbox.Probe(); !sup.OK {
		t.Skip("no sandbox on this machine: " + sup.Reason)
	}
}
