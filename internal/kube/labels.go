package kube

// What labctl puts on the objects it creates, and how it names its
// namespaces: verify marks, reset and the fault suite find them by these.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "labctl"
	// NamespacePrefix starts the name of every namespace verify creates
	// (labctl-<lab>-<random>).
	NamespacePrefix = "labctl-"
)
