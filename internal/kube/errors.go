package kube

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/labctl/labctl/internal/userr"
)

// APIError turns a failed API request into the one line a user reads:
// what labctl was doing, the server's reason, and what to do, which
// depends on why it failed.
func APIError(err error, what string) error {
	next := "check that the cluster is running (`labctl status`)"
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		next = "the credentials of this kubeconfig context lack that permission: use labctl's own context, or one with cluster-admin rights"
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		next = "something else changed it at the same time: run the command again"
	}
	return userr.Wrap(err, userr.ExitFailure, what+": "+userr.Message(err), next)
}
