package cluster

import (
	"os"
	"path/filepath"
)

// StateDir is $XDG_STATE_HOME/labctl/<sub> (default ~/.local/state/...):
// where providers keep what outlives one labctl run.
func StateDir(sub string) string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "labctl", sub)
}

// AuditPolicy is the API audit policy of clusters labctl creates. It
// records who did what with which result (verb, user, impersonated user,
// object, response code) for every request, except the control plane's own
// chatter, which would drown the operator's requests that checks look for.
// Updates of StatefulSets keep their request body too: a check compares an
// operator's retry after a conflict with the write that conflicted (did
// the retry carry the change?).
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:kube-controller-manager", "system:kube-scheduler", "system:kube-proxy", "system:apiserver", "labctl-kwok"]
- level: None
  userGroups: ["system:nodes", "system:serviceaccounts:kube-system", "system:serviceaccounts:local-path-storage"]
- level: None
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/openapi*", "/api", "/apis*"]
- level: Request
  verbs: ["update"]
  resources:
  - group: apps
    resources: ["statefulsets"]
- level: Metadata
`
