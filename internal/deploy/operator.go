package deploy

import (
	"context"
	"fmt"
)

// Operator is a deployed operator, as checks and commands see it,
// whichever way it runs (a local process or a Deployment).
type Operator struct {
	Project *Project
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
}

// ServiceAccountUser is the user name of a ServiceAccount.
func ServiceAccountUser(namespace, name string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name)
}
