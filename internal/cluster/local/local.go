// Package local is the provider for machines without a container engine: a
// real control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) run as background processes, with kwok simulating a node
// so pods become Ready, Job pods succeed and PVCs bind.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/fslock"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kubeconfig"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/userr"
)

// ProviderName is the --provider value.
const ProviderName = "local"

// startOrder is the order components start in; they stop in reverse.
var startOrder = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// Provider runs local clusters under StateRoot/<name>.
type Provider struct {
	// StateRoot holds one directory per cluster; default
	// $XDG_STATE_HOME/labctl/clusters.
	StateRoot string
	// Binaries returns the control-plane executables (building them if
	// needed). Default: controlplane.Ensure with default options.
	Binaries func(ctx context.Context, s *iostreams.IOStreams) (*controlplane.Binaries, error)
	// TiedToParent makes the processes die with this process (tests).
	TiedToParent bool
	// PickPort returns a free TCP port on 127.0.0.1; replaceable in tests.
	PickPort func() (int, error)
	// ExtraArgs are appended to a component's command line.
	ExtraArgs map[string][]string
	// StartTimeout bounds the whole start-up (default 2 minutes).
	StartTimeout time.Duration
	// MinFree is the free space Up asks of the state directory's disk
	// before it starts anything (0 = minFreeBytes; negative = no check,
	// for tests in which a component meets the full disk itself).
	MinFree int64
	// Operators is how operators run on this provider's clusters
	// (labctl wires it up; nil = labctl cannot run one there).
	Operators cluster.OperatorRunner
}

var _ cluster.Provider = (*Provider)(nil)

// Name implements cluster.Provider.
func (p *Provider) Name() string { return ProviderName }

// ContextName is the kubeconfig context of a local cluster.
func ContextName(name string) string { return "labctl-" + name }

// DefaultStateRoot is $XDG_STATE_HOME/labctl/clusters (~/.local/state/...).
func DefaultStateRoot() string { return cluster.StateDir("clusters") }

func (p *Provider) root() string {
	if p.StateRoot != "" {
		return p.StateRoot
	}
	return DefaultStateRoot()
}

// Dir is the state directory of the named cluster.
func (p *Provider) Dir(name string) string { return filepath.Join(p.root(), name) }

// Up implements cluster.Provider.
func (p *Provider) Up(ctx context.Context, opts cluster.UpOptions) (_ *cluster.Cluster, err error) {
	if runtime.GOOS != "linux" {
		// before the control-plane build, which would take minutes for nothing
		return nil, userr.NeedsLinux("the local provider")
	}
	if err := cluster.ValidateName(opts.Name); err != nil {
		return nil, userr.Usage(err.Error(), "for example: labctl up --provider local --name lab1")
	}
	s := opts.Streams
	if s == nil {
		s, _, _ = iostreams.Test(false)
	}
	// The kubeconfig is written last; a cluster started for a file that
	// cannot take its context would be left running for nothing.
	if !opts.SkipKubeconfigMerge {
		if err := kubeconfig.CheckWritable(opts.KubeconfigPath); err != nil {
			return nil, err
		}
	}
	dir := p.Dir(opts.Name)
	if err := os.MkdirAll(p.root(), 0o755); err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot create %s: %v", p.root(), err), "set XDG_STATE_HOME to a writable directory")
	}
	unlock, err := lock(ctx, dir+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	fresh := false
	var st *state // filled in as its processes start, for the cleanup below
	defer func() {
		// A new cluster that did not come up leaves nothing behind: no
		// process, no state directory or lock, no context. (A restarted
		// one keeps its data for the next try.)
		if err != nil && fresh {
			var ue *userr.Error
			if errors.As(err, &ue) && strings.Contains(ue.Next, dir) {
				// the logs it points to are removed with the directory
				ue.Next = "run the same `labctl up` with -v to see the end of its log"
			}
			_ = stopAll(context.WithoutCancel(ctx), dir, st)
			_ = os.RemoveAll(dir)
			_ = os.Remove(dir + ".lock")
			if !opts.SkipKubeconfigMerge {
				_ = kubeconfig.Remove(opts.KubeconfigPath, ContextName(opts.Name))
			}
		}
	}()

	st, err = loadState(dir)
	var corrupt errCorrupt
	switch {
	case errors.As(err, &corrupt):
		return nil, userr.Wrap(err, userr.ExitFailure,
			fmt.Sprintf("the state of local cluster %q in %s is unreadable (%v)", opts.Name, dir, corrupt.err),
			fmt.Sprintf("run `labctl down --name %s` to remove it, then `labctl up` again", opts.Name))
	case err == nil:
		if p.healthy(ctx, dir, st) {
			c, err := p.clusterFor(dir, st)
			if err != nil {
				return nil, err
			}
			c.Reused = true
			return c, p.mergeKubeconfig(opts, dir, st)
		}
		// Stale: a reboot or a crash took some processes. Stop what is
		// left and start again on the same data, so objects survive.
		fmt.Fprintf(s.ErrOut, "Found local cluster %q stopped (processes gone); restarting it with its data.\n", opts.Name)
		if err := stopAll(ctx, dir, st); err != nil {
			return nil, err
		}
	default: // no state: a new cluster
		if err := os.RemoveAll(dir); err != nil {
			return nil, userr.Wrap(err, userr.ExitFailure, "cannot clear "+dir, "remove it by hand")
		}
		st = &state{Name: opts.Name, Created: time.Now().UTC()}
		fresh = true
	}
	if err := checkFreeSpace(p.root(), p.MinFree); err != nil {
		return nil, err
	}

	step := s.StartStep("Preparing control-plane binaries")
	bins, err := p.binaries(ctx, s, step, opts.BinDir)
	if err != nil {
		step.Fail()
		return nil, err
	}
	step.Done(bins.Source)
	st.BinDir = bins.Dir

	step = s.StartStep(fmt.Sprintf("Starting local cluster %q", opts.Name))
	if err := p.prepare(dir); err != nil {
		step.Fail()
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot write the cluster's files in %s: %v", dir, err), "check the disk and permissions of XDG_STATE_HOME")
	}
	timeout := p.StartTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	startCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.startWithFreePorts(startCtx, s, step, dir, st); err != nil {
		step.Fail()
		_ = stopAll(context.WithoutCancel(ctx), dir, st)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	step.Done()
	c, err := p.clusterFor(dir, st)
	if err != nil {
		return nil, err
	}
	if err := p.mergeKubeconfig(opts, dir, st); err != nil {
		return c, err
	}
	return c, nil
}

func (p *Provider) clusterFor(dir string, st *state) (*cluster.Cluster, error) {
	l := layout{dir: dir}
	cfg, err := restConfig(l)
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, "cannot read the cluster's kubeconfig: "+err.Error(), fmt.Sprintf("run `labctl down --name %s` and `labctl up` again", st.Name))
	}
	return &cluster.Cluster{
		Name:       st.Name,
		Provider:   ProviderName,
		Context:    ContextName(st.Name),
		Kubeconfig: l.file("kubeconfig"),
		Config:     cfg,
		Operators:  p.Operators,
		Env: cluster.Env{
			RealPods: false,
			StateDir: dir,
			AuditLog: func(context.Context) (io.ReadCloser, error) { return os.Open(l.auditLog()) },
		},
	}, nil
}

// existing reads the state of the cluster name: cluster.ErrNotFound when
// there is none, a usage error for a name labctl never gives.
func (p *Provider) existing(name string) (string, *state, error) {
	if err := cluster.ValidateName(name); err != nil {
		return "", nil, userr.Usage(err.Error(), "pass the name given to `labctl up --name`")
	}
	dir := p.Dir(name)
	st, err := loadState(dir)
	if errors.Is(err, errNoState) {
		return "", nil, fmt.Errorf("local cluster %q: %w", name, cluster.ErrNotFound)
	}
	if err != nil {
		return "", nil, unreadableState(name, err)
	}
	return dir, st, nil
}

// Get implements cluster.Provider.
func (p *Provider) Get(ctx context.Context, name string) (*cluster.Cluster, error) {
	dir, st, err := p.existing(name)
	if err != nil {
		return nil, err
	}
	if !p.healthy(ctx, dir, st) {
		return nil, userr.New(fmt.Sprintf("local cluster %q is not running", name), fmt.Sprintf("run `labctl up --provider local --name %s` to start it again", name))
	}
	return p.clusterFor(dir, st)
}

func unreadableState(name string, err error) error {
	return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("the state of local cluster %q is unreadable (%v)", name, err),
		fmt.Sprintf("run `labctl down --name %s`, then `labctl up` again", name))
}

// Down implements cluster.Provider: it stops every process that belongs
// to the cluster (found by its state directory, so it works after a crash
// or with a corrupt state file), removes the kubeconfig context and the
// directory.
func (p *Provider) Down(ctx context.Context, name string) error {
	if err := cluster.ValidateName(name); err != nil {
		return userr.Usage(err.Error(), "pass the name given to `labctl up --name`")
	}
	dir := p.Dir(name)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return userr.Wrap(fmt.Errorf("local cluster %q: %w", name, cluster.ErrNotFound), userr.ExitFailure,
			fmt.Sprintf("there is no local cluster named %q", name), "`labctl status` shows the clusters that exist")
	}
	unlock, err := lock(ctx, dir+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	st, _ := loadState(dir)
	if err := stopAll(ctx, dir, st); err != nil {
		return err
	}
	kcPath := ""
	if st != nil {
		kcPath = st.UserKubeconfig
	}
	// Removing the cluster never depends on the user's kubeconfig: an
	// unreadable one is reported after the cluster is gone.
	var kcErr error
	if st == nil || kcPath != "" {
		kcErr = kubeconfig.Remove(kcPath, ContextName(name))
	}
	if err := os.RemoveAll(dir); err != nil {
		return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("stopped the cluster but cannot remove %s: %v", dir, err), "remove it by hand")
	}
	_ = os.Remove(dir + ".lock")
	if kcErr != nil {
		return &cluster.Warning{Err: userr.Wrap(kcErr, userr.ExitFailure,
			fmt.Sprintf("the cluster is deleted, but its context %s is still in your kubeconfig (%s)", ContextName(name), userr.Message(kcErr)),
			fmt.Sprintf("fix the file, then `kubectl config delete-context %s`", ContextName(name)))}
	}
	return nil
}

// stopAll stops every process of the cluster in dir that labctl recorded:
// operators' supervisors first (their record files under operators/),
// then the control plane in reverse start order. Only recorded processes
// (pid and start time) are stopped, never one found by its command line.
func stopAll(ctx context.Context, dir string, st *state) error {
	type target struct {
		name string
		rec  proc.Record
	}
	var targets []target
	for _, r := range proc.LoadRecords(filepath.Join(dir, "operators", "*", proc.SupervisorRecord)) {
		targets = append(targets, target{"operator supervisor", r})
	}
	if st != nil {
		for i := len(startOrder) - 1; i >= 0; i-- {
			c := startOrder[i]
			if r, ok := st.Procs[c]; ok {
				targets = append(targets, target{c, r})
			} else if pid := st.PIDs[c]; ownedAlive(dir, pid) { // a state written before records
				st, _ := proc.StartTime(pid)
				targets = append(targets, target{c, proc.Record{PID: pid, Start: st}})
			}
		}
	}
	for _, t := range targets {
		if err := proc.StopRecord(ctx, t.rec, 10*time.Second); err != nil {
			return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot stop %s (pid %d): %v", t.name, t.rec.PID, err), fmt.Sprintf("kill it by hand: kill -9 %d", t.rec.PID))
		}
	}
	return nil
}

// List returns the names of the local clusters that have a state directory.
func (p *Provider) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(p.root())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func lock(ctx context.Context, path string) (func(), error) {
	unlock, err := fslock.Lock(ctx, path)
	if err != nil && ctx.Err() == nil {
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot lock %s: %v", path, err), "check permissions of XDG_STATE_HOME")
	}
	return unlock, err
}
