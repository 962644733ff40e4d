// Building the manager binary (cached by its inputs) and waiting until a started manager is ready.

package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/filecopy"
	"github.com/labctl/labctl/internal/fslock"
	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/sandbox"
	"github.com/labctl/labctl/internal/supervise"
)

// BuildOptions tune BuildManager.
type BuildOptions struct {
	// Go is the go command (default "go").
	Go string
	// Box, when set, is where the project is built: the go command runs
	// inside this sandbox as its unprivileged user (grading). The
	// project's modules are downloaded first by the caller with `go mod
	// download`, which runs no code of the project.
	Box *sandbox.Box
	// Nice, above 0, lowers the build's CPU priority (a nice value,
	// inherited by the compilers it starts): for a build made ahead of
	// need beside work whose timing matters, such as a verify.
	Nice int
}

// BuildManager returns the project's manager executable, built with
// `go build` into the user's cache under a hash of its sources' contents
// and of the Go toolchain, so a new cluster or a redeploy of unchanged
// code skips even the link step. Cached binaries are read-only and their
// own hash is checked before one is reused (a binary changed after it was
// built is built again). Callers may build first (grading does) so a
// project that does not compile costs no cluster; RunLocal then finds the
// binary cached.
func BuildManager(ctx context.Context, p *Project, o BuildOptions) (path string, reused bool, err error) {
	gt, err := toolchainOf(ctx, o.Go)
	if err != nil {
		return "", false, err
	}
	sum, err := operator.Fingerprint(p.Dir, gt.id())
	if err != nil {
		return "", false, err
	}
	cache, err := cacheDir()
	if err != nil {
		return "", false, err
	}
	dir := filepath.Join(cache, "managers", sum[:32])
	bin := filepath.Join(dir, "manager")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", false, err
	}
	// One build per entry at a time: two submissions of a class with the
	// same operator sources (tests aside) share the entry, and are graded
	// side by side.
	unlock, err := fslock.Lock(ctx, dir+".lock")
	if err != nil {
		return "", false, fmt.Errorf("waiting for another build of the same manager: %w", err)
	}
	defer unlock()
	if cachedIntact(bin) {
		now := time.Now()
		_ = os.Chtimes(dir, now, now) // recently used: pruned last
		return bin, true, nil
	}
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	built := bin + ".tmp"
	if o.Box != nil {
		built = filepath.Join(o.Box.Home(), "manager.build")
		err = buildSandboxed(ctx, p, gt, o.Box, built)
	} else {
		err = buildManager(ctx, p, built, gt.goBin, o.Nice)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", false, err
	}
	if err := storeManager(built, bin); err != nil {
		_ = os.RemoveAll(dir)
		return "", false, err
	}
	pruneManagers(filepath.Dir(dir), keepManagers)
	return bin, false, nil
}

// cachedIntact: bin exists and its content still has the hash recorded
// when it was stored.
func cachedIntact(bin string) bool {
	want, err := os.ReadFile(bin + ".sha256")
	if err != nil {
		return false
	}
	got, err := fileHash(bin)
	return err == nil && got == strings.TrimSpace(string(want))
}

// storeManager copies a fresh build into the cache, read-only, with its
// hash beside it.
func storeManager(built, bin string) error {
	tmp := bin + ".tmp"
	if tmp != built {
		if err := filecopy.Into(tmp, os.O_TRUNC, 0o755, built); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o555); err != nil {
		return err
	}
	sum, err := fileHash(tmp)
	if err != nil {
		return err
	}
	if err := os.WriteFile(bin+".sha256", []byte(sum+"\n"), 0o444); err != nil {
		return err
	}
	return os.Rename(tmp, bin)
}

// keepManagers bounds the manager cache: grading a class leaves one
// binary per distinct submission (tens of MB each).
const keepManagers = 24

// pruneManagers removes all but the newest keep builds under root.
func pruneManagers(root string, keep int) {
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) <= keep {
		return
	}
	type build struct {
		path string
		mod  time.Time
	}
	var builds []build
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.IsDir() {
			builds = append(builds, build{filepath.Join(root, e.Name()), info.ModTime()})
		}
	}
	sort.Slice(builds, func(i, j int) bool { return builds[i].mod.After(builds[j].mod) })
	for _, b := range builds[min(keep, len(builds)):] {
		_ = os.RemoveAll(b.path)
		_ = os.Remove(b.path + ".lock")
	}
}

func buildManager(ctx context.Context, p *Project, out, goBin string, nice int) error {
	pkg := mainPackage(p)
	// -s -w: no symbol tables; the manager is never debugged from here and
	// linking is noticeably faster.
	cmd := exec.CommandContext(ctx, goBin, "build", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Start()
	if err == nil {
		if nice > 0 {
			proc.Renice(cmd.Process.Pid, nice)
		}
		err = cmd.Wait()
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &gobuild.Error{Dir: p.Dir, Output: buf.String(), Err: err}
	}
	return nil
}

// waitManagerReady polls the manager's /readyz (a process that has not
// bound its port offers nothing to watch) and gives up early when the
// supervisor counts a crash.
func waitManagerReady(ctx context.Context, port int, restartsFile string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	for {
		if n, _ := supervise.Restarts(restartsFile); n > 0 {
			return errors.New("it exited during start-up")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no ready answer on %s within %s", url, timeout)
		case <-tick.C:
		}
	}
}
