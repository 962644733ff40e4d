package deploy

import (
	"context"
	"path/filepath"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/fslock"
	"github.com/labctl/labctl/internal/operator"
)

// The three ways labctl runs an operator, one per provider: each provider
// is handed its runner (cluster.OperatorRunner) where labctl is wired up,
// so no code asks which provider a cluster comes from.
var (
	_ cluster.OperatorRunner = AsProcess{}
	_ cluster.OperatorRunner = IntoKind{}
	_ cluster.OperatorRunner = FromRegistry{}
)

// AsProcess runs the manager as a supervised local process with only its
// ServiceAccount's token, as `make install run` would (the local provider,
// whose pods kwok simulates and cannot run a manager image).
type AsProcess struct {
	// TiedToParent makes the manager die with this process (tests).
	TiedToParent bool
}

// Run implements cluster.OperatorRunner.
func (a AsProcess) Run(ctx context.Context, c *cluster.Cluster, dir string, o cluster.RunOptions) (*operator.Operator, error) {
	return locked(ctx, c, dir, func(p *Project) (*operator.Operator, error) {
		return RunLocal(ctx, c, p, LocalOptions{Streams: o.Streams, TiedToParent: a.TiedToParent})
	})
}

// Current implements cluster.OperatorRunner: the cluster's state dir
// records which projects run; the one of dir, else of ref, is chosen.
func (AsProcess) Current(_ context.Context, c *cluster.Cluster, dir, ref string) (*operator.Operator, error) {
	return CurrentLocal(c, dir, ref)
}

// Stop implements cluster.OperatorRunner.
func (AsProcess) Stop(ctx context.Context, c *cluster.Cluster) error { return StopLocal(ctx, c) }

// IntoKind builds the manager image with the cluster's engine, loads it
// into the nodes and rolls out the project's Deployment (a kind cluster).
type IntoKind struct {
	// Provider finds the engine and the nodes (nil = default settings).
	Provider *kind.Provider
}

// Run implements cluster.OperatorRunner.
func (k IntoKind) Run(ctx context.Context, c *cluster.Cluster, dir string, o cluster.RunOptions) (*operator.Operator, error) {
	return locked(ctx, c, dir, func(p *Project) (*operator.Operator, error) {
		return ToKind(ctx, c, p, KindOptions{Streams: o.Streams, Provider: k.Provider})
	})
}

// Current implements cluster.OperatorRunner.
func (IntoKind) Current(ctx context.Context, c *cluster.Cluster, dir, ref string) (*operator.Operator, error) {
	return currentDeployment(ctx, c, dir, ref)
}

// Stop implements cluster.OperatorRunner: a Deployment goes with its
// cluster or namespace.
func (IntoKind) Stop(context.Context, *cluster.Cluster) error { return nil }

// FromRegistry rolls out the project's Deployment with an image the
// cluster pulls ($LABCTL_IMAGE): labctl cannot load images into a cluster
// it did not create.
type FromRegistry struct{}

// Run implements cluster.OperatorRunner.
func (FromRegistry) Run(ctx context.Context, c *cluster.Cluster, dir string, o cluster.RunOptions) (*operator.Operator, error) {
	p, err := ResolveProject(dir)
	if err != nil {
		return nil, err
	}
	return ToExisting(ctx, c, p, ExistingOptions{Streams: o.Streams})
}

// Current implements cluster.OperatorRunner.
func (FromRegistry) Current(ctx context.Context, c *cluster.Cluster, dir, ref string) (*operator.Operator, error) {
	return currentDeployment(ctx, c, dir, ref)
}

// Stop implements cluster.OperatorRunner.
func (FromRegistry) Stop(context.Context, *cluster.Cluster) error { return nil }

// currentDeployment describes the manager Deployment of the project in dir,
// else of the reference project ref.
func currentDeployment(ctx context.Context, c *cluster.Cluster, dir, ref string) (*operator.Operator, error) {
	p, err := ResolveProjectFor(dir, ref)
	if err != nil {
		return nil, err
	}
	return CurrentInCluster(ctx, c.Config, p)
}

// locked resolves the project in dir ("" = the reference operator) and
// runs deploy holding the cluster's deploy lock.
func locked(ctx context.Context, c *cluster.Cluster, dir string, deploy func(*Project) (*operator.Operator, error)) (*operator.Operator, error) {
	p, err := ResolveProject(dir)
	if err != nil {
		return nil, err
	}
	unlock, err := lockDeploy(ctx, c)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return deploy(p)
}

// lockDeploy serialises deploys onto one cluster: a second `labctl up`
// waits for the first's deploy instead of replacing its manager half-way.
func lockDeploy(ctx context.Context, c *cluster.Cluster) (func(), error) {
	if c.Env.StateDir == "" {
		return func() {}, nil
	}
	return fslock.Lock(ctx, filepath.Join(c.Env.StateDir, "deploy.lock"))
}
