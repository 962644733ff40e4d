package checks

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/gobuild"
	"github.com/labctl/labctl/internal/testmutant"
)

// mutantBuild is the project's tests compiled once against the
// instrumented controller: every mutant, in every step, runs these
// binaries (a test binary of controller-runtime takes seconds to link).
type mutantBuild struct {
	in   *testmutant.Instrumented
	bins []gobuild.TestBinary
	// assets is the envtest binaries' directory; read what the runs read:
	// not the overlay, whose generated file names the mutants' tokens.
	assets string
	read   []string
	// failed: the tests do not compile with labctl's wrappers.
	failed *gobuild.TestRun
	// key names the build among the run's memos (its baseline, its
	// control).
	key string
	// skip and err: no build (the controller has no package labctl can
	// instrument; labctl could not build).
	skip string
	err  error
}

// buildMutants instruments the controller package and compiles the
// tests against it, once per run.
func buildMutants(ctx context.Context, c *Context, pkgs []string, rel, reconciler string) *mutantBuild {
	key := c.ProjectDir() + " " + strings.Join(pkgs, " ") + " " + rel + " " + reconciler
	return c.run.once("tests-catch build "+key, func() any {
		b := &mutantBuild{key: key}
		cp := controlplane.Installed()
		if cp == nil {
			b.err = errNoAssets
			return b
		}
		in, err := testmutant.Instrument(filepath.Join(c.ProjectDir(), rel), reconciler)
		if err != nil {
			b.skip = fmt.Sprintf("labctl cannot make mutants of %s: %v", rel, oneLine(err))
			return b
		}
		b.in = in
		// The overlay and the binaries live as long as the run: anyone may
		// read them (a sandbox's user builds and runs them).
		work, err := c.run.scratchDir("labctl-mutants-")
		if err == nil {
			b.assets, err = envtestAssets(cp.Dir)
		}
		var overlay, binDir string
		if err == nil {
			c.run.addScratch(b.assets)
			overlay, err = in.WriteOverlay(work)
		}
		if err == nil {
			binDir, err = c.run.scratchDir("labctl-tests-")
		}
		if err != nil {
			b.err = fmt.Errorf("preparing the mutants: %w", err)
			return b
		}
		b.read = []string{cp.Dir, b.assets, binDir}
		ctx, cancel := context.WithTimeout(ctx, testLimit(ctx, c))
		defer cancel()
		base := gobuild.Command{Dir: c.ProjectDir(), Read: []string{cp.Dir, b.assets, work}, Write: []string{binDir}}
		// Without -cover: go's cover tool reads the files on disk, not the
		// overlay's (it would build the student's own controller, no
		// mutant in it).
		b.bins, b.failed, err = gobuild.CompileTests(ctx, c.goRunner(), base, pkgs, []string{"-overlay=" + overlay}, binDir)
		b.err = testRunError(ctx, err, testLimit(ctx, c))
		return b
	}).(*mutantBuild)
}

// baseline is the build's run with no mutant alive, made once per run:
// by go-test, or by the first tests-catch step that needs it.
func (b *mutantBuild) baseline(ctx context.Context, c *Context) baselineRun {
	return c.run.once("tests-catch baseline "+b.key, func() any {
		run, err := b.run(ctx, c, "", false)
		return baselineRun{run, err}
	}).(baselineRun)
}

// run runs the compiled tests with a mutant alive ("" for none), one
// package after another as go test -p=1 would. With failFast (every test
// passed at baseline) each binary stops at its first failure, and the
// run at the first package that fails.
func (b *mutantBuild) run(ctx context.Context, c *Context, mutant string, failFast bool) (*gobuild.TestRun, error) {
	limit := testLimit(ctx, c)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var stdout bytes.Buffer
	for _, bin := range b.bins {
		dl, _ := ctx.Deadline()
		left := time.Until(dl)
		flags := []string{"-test.timeout=" + (left - left/10).Round(time.Second).String()}
		if failFast {
			flags = append(flags, "-test.failfast")
			if bin.Ginkgo {
				flags = append(flags, "-ginkgo.fail-fast")
			}
		}
		cmd := bin.Command(gobuild.Command{Env: testEnv(b.assets, b.in.Env(mutant)), Read: b.read, Stdout: &stdout}, flags...)
		_, err := c.goRunner()(ctx, cmd)
		if err := testRunError(ctx, err, limit); err != nil {
			return nil, err
		}
		if err != nil && failFast {
			break
		}
	}
	return gobuild.ParseTestEvents(stdout.Bytes()), nil
}
