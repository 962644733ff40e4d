// Package cluster defines what labctl needs from a Kubernetes cluster,
// whatever provides it: a kind cluster, a local control plane, or a cluster
// the user already has. Providers live in sub-packages.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"

	"k8s.io/client-go/rest"

	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/userr"
)

// DefaultName is the cluster name the course uses.
const DefaultName = "k8s-operators-course"

// ErrNotFound is returned (wrapped) when a named cluster does not exist.
var ErrNotFound = errors.New("cluster not found")

// Provider creates, inspects and removes clusters of one kind.
type Provider interface {
	// Name is the value of --provider that selects this provider.
	Name() string
	// Up creates the cluster, or returns the running one unchanged
	// (Cluster.Reused tells which).
	Up(ctx context.Context, opts UpOptions) (*Cluster, error)
	// Get returns a running cluster; errors.Is(err, ErrNotFound) when none.
	Get(ctx context.Context, name string) (*Cluster, error)
	// Down stops and removes the cluster and its kubeconfig context.
	Down(ctx context.Context, name string) error
	// Status describes the cluster's parts for `labctl status`.
	Status(ctx context.Context, name string) (*Health, error)
}

// UserOwned reports whether p's clusters belong to the user rather than to
// labctl (the existing provider): a command that looks for labctl's
// clusters in every provider skips such a provider, and never deletes
// what it finds there.
func UserOwned(p Provider) bool {
	u, ok := p.(interface{ UserOwned() bool })
	return ok && u.UserOwned()
}

// UpOptions are the inputs of Provider.Up.
type UpOptions struct {
	Name    string
	Streams *iostreams.IOStreams
	// KubeconfigPath is the user's kubeconfig to merge the context into;
	// empty means the default ($KUBECONFIG's first entry or ~/.kube/config).
	KubeconfigPath string
	// SkipKubeconfigMerge leaves the user's kubeconfig alone (tests).
	SkipKubeconfigMerge bool
	// BinDir holds prebuilt control-plane binaries (local provider only).
	BinDir string
	// NodeImage replaces the pinned kind node image (kind provider only),
	// e.g. one `labctl build node-image` made where no registry answers.
	NodeImage string
}

// Cluster is a running cluster.
type Cluster struct {
	Name     string
	Provider string
	// Context is the kubeconfig context name (kind-NAME, labctl-NAME, ...).
	Context string
	// Kubeconfig is a file holding Context with admin credentials.
	Kubeconfig string
	// Config is a client config for the cluster's admin.
	Config *rest.Config
	// Reused is true when Up found the cluster already running.
	Reused bool
	Env    Env
	// Operators runs operators on this cluster the way its provider can;
	// nil when labctl cannot run one there.
	Operators OperatorRunner
}

// OperatorRunner runs a kubebuilder project's manager on a cluster. Each
// provider decides how: the local provider as a supervised process with
// the project's RBAC, kind as an image loaded into its nodes and a
// Deployment, an existing cluster as an image from a registry.
type OperatorRunner interface {
	// Run builds and starts the manager of projectDir ("" = the reference
	// operator), replacing the one running, and returns once it serves.
	Run(ctx context.Context, c *Cluster, projectDir string, o RunOptions) (*operator.Operator, error)
	// Current finds the manager running now. Where the cluster cannot
	// tell which project it runs (a Deployment), it looks for the one of
	// projectDir, else of the reference project ref ("" = the Database
	// operator).
	Current(ctx context.Context, c *Cluster, projectDir, ref string) (*operator.Operator, error)
	// Stop stops every manager labctl runs on the cluster as a process;
	// a no-op where managers are Deployments (deleting the cluster, or
	// the namespace, removes them).
	Stop(ctx context.Context, c *Cluster) error
}

// RunOptions tune OperatorRunner.Run.
type RunOptions struct {
	Streams *iostreams.IOStreams
}

// RunOperator runs the operator of projectDir on c; see OperatorRunner.
func (c *Cluster) RunOperator(ctx context.Context, projectDir string, o RunOptions) (*operator.Operator, error) {
	if c.Operators == nil {
		return nil, c.cannotRun()
	}
	return c.Operators.Run(ctx, c, projectDir, o)
}

// CurrentOperator finds the operator running on c; see OperatorRunner.
func (c *Cluster) CurrentOperator(ctx context.Context, projectDir, ref string) (*operator.Operator, error) {
	if c.Operators == nil {
		return nil, c.cannotRun()
	}
	return c.Operators.Current(ctx, c, projectDir, ref)
}

// StopOperators stops the managers labctl runs on c as processes.
func (c *Cluster) StopOperators(ctx context.Context) error {
	if c.Operators == nil {
		return nil
	}
	return c.Operators.Stop(ctx, c)
}

func (c *Cluster) cannotRun() error {
	return userr.New(fmt.Sprintf("labctl cannot run an operator on the %s cluster %q", c.Provider, c.Name),
		"use `labctl up --provider local` or `--provider kind`")
}

// Env tells checks what the cluster can do, so they never need to know which
// provider they run on.
type Env struct {
	// RealPods is true when pods run real containers (kind). On the local
	// provider kwok simulates them: they become Ready but run nothing.
	RealPods bool
	// AuditLog opens the API audit log (JSON lines); nil when the cluster
	// has none that labctl can read.
	AuditLog func(ctx context.Context) (io.ReadCloser, error)
	// StateDir is where the provider keeps files for this cluster (logs,
	// operator processes); empty for clusters labctl does not own.
	StateDir string
}

// Health is a snapshot of a cluster: whether each of its parts runs.
type Health struct {
	Name       string      `json:"name"`
	Provider   string      `json:"provider"`
	Context    string      `json:"context"`
	Running    bool        `json:"running"`
	Components []Component `json:"components"`
}

// Component is one process or container of a cluster.
type Component struct {
	Name    string `json:"name"`
	PID     int    `json:"pid,omitempty"`
	Address string `json:"address,omitempty"` // host:port it serves on, if any
	Healthy bool   `json:"healthy"`
	Detail  string `json:"detail,omitempty"` // why not healthy, or extra facts
	// RSSBytes and PSSBytes are resident and proportional set sizes; PSS
	// splits shared pages (one multi-call binary) between processes.
	RSSBytes uint64 `json:"rssBytes,omitempty"`
	PSSBytes uint64 `json:"pssBytes,omitempty"`
}

var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$`)

// ValidateName checks a cluster name: lowercase letters, digits and dashes,
// as kind and kubeconfig context names require.
func ValidateName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("invalid cluster name %q: use 1-50 lowercase letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// Warning is returned by an operation that did its job but could not do
// everything around it (e.g. Down removed the cluster but could not edit an
// unreadable kubeconfig). Commands print it and succeed.
type Warning struct{ Err error }

func (w *Warning) Error() string { return w.Err.Error() }
func (w *Warning) Unwrap() error { return w.Err }
