// Package operator describes a deployed operator as checks and commands see
// it, whichever way it runs (a local process or a Deployment). It is a leaf:
// checks read an operator through it without importing how one is deployed.
package operator

import (
	"context"
	"fmt"
	"time"
)

// Operator is a deployed operator.
type Operator struct {
	// ProjectName and ProjectDir name the kubebuilder project it was built
	// from (the PROJECT file's projectName, its directory); ProjectDir is
	// empty when not known (in-cluster, deployed by someone else).
	ProjectName string
	ProjectDir  string
	// Namespace and ServiceAccount of the manager (from config/default).
	Namespace      string
	ServiceAccount string
	// Identity is the user name its API requests carry, as the audit log
	// and SubjectAccessReviews see it.
	Identity string
	// Logs returns the manager's log output since it was deployed.
	Logs func(ctx context.Context) ([]byte, error)
	// Restarts counts how often the manager restarted since deployed.
	Restarts func(ctx context.Context) (int, error)
	// CPU is the CPU time the manager (all its processes) has used since
	// it started; nil where it cannot be read (in-cluster). Two readings
	// give its load over a while: an operator with nothing to do uses
	// next to none.
	CPU func(ctx context.Context) (time.Duration, error)
	// SourceHash fingerprints the project's sources as they were when the
	// running manager was built ("" when unknown, e.g. in-cluster).
	SourceHash string
	// Metrics scrapes the manager's metrics endpoint as Prometheus does,
	// with token as the bearer token, and returns the HTTP status and
	// body; nil where labctl knows no endpoint.
	Metrics func(ctx context.Context, token string) (status int, body []byte, err error)
}

// SourceChanged reports whether the project's sources differ from those
// the running manager was built from; known is false when that cannot be
// told (no fingerprint was recorded at deploy, or no project).
func (o *Operator) SourceChanged(dir string) (changed, known bool, err error) {
	if o.SourceHash == "" || dir == "" {
		return false, false, nil
	}
	now, err := SourceFingerprint(dir)
	if err != nil {
		return false, false, err
	}
	return now != o.SourceHash, true, nil
}

// ServiceAccountUser is the user name of a ServiceAccount.
func ServiceAccountUser(namespace, name string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name)
}
