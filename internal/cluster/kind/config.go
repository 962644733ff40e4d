package kind

import (
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// NodeImage is the node image kind v0.33.0 defaults to (Kubernetes
// v1.37.0), pinned by digest so every student gets the same cluster.
const NodeImage = "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"

// Paths inside the control-plane node container.
const (
	// AuditLogPath is where the API server writes its audit log.
	AuditLogPath = "/var/log/kubernetes/audit/audit.log"
	auditLogDir  = "/var/log/kubernetes/audit"
	// policyDir holds the audit policy labctl mounts from the host.
	policyDir  = "/etc/kubernetes/labctl"
	policyPath = policyDir + "/audit-policy.yaml"
)

// auditPatch turns on audit logging in kubeadm's ClusterConfiguration and
// mounts the policy and log directories into the API server's static pod.
// It names no apiVersion and gives extraArgs as a map, so kind applies it to
// v1beta3 (Kubernetes < 1.36) and v1beta4 alike: for v1beta4 kind converts
// the map into name/value pairs merged with its own arguments.
const auditPatch = `kind: ClusterConfiguration
apiServer:
  extraArgs:
    audit-policy-file: ` + policyPath + `
    audit-log-path: ` + AuditLogPath + `
    audit-log-maxsize: "200"
    audit-log-maxbackup: "1"
  extraVolumes:
  - name: labctl-audit-policy
    hostPath: ` + policyDir + `
    mountPath: ` + policyDir + `
    readOnly: true
    pathType: DirectoryOrCreate
  - name: labctl-audit-log
    hostPath: ` + auditLogDir + `
    mountPath: ` + auditLogDir + `
    readOnly: false
    pathType: DirectoryOrCreate
`

// ClusterConfig is the kind configuration of the course cluster: one
// control-plane node labelled ingress-ready=true with host ports 80 and 443
// mapped (as the course's setup script does, when mapPorts), and API audit
// logging with the policy file at policyHostPath.
func ClusterConfig(name, nodeImage, policyHostPath string, mapPorts bool) *v1alpha4.Cluster {
	node := v1alpha4.Node{
		Role:   v1alpha4.ControlPlaneRole,
		Image:  nodeImage,
		Labels: map[string]string{"ingress-ready": "true"},
		ExtraMounts: []v1alpha4.Mount{{
			HostPath:      policyHostPath,
			ContainerPath: policyPath,
			Readonly:      true,
		}},
	}
	if mapPorts {
		node.ExtraPortMappings = []v1alpha4.PortMapping{
			{ContainerPort: 80, HostPort: 80, Protocol: v1alpha4.PortMappingProtocolTCP},
			{ContainerPort: 443, HostPort: 443, Protocol: v1alpha4.PortMappingProtocolTCP},
		}
	}
	return &v1alpha4.Cluster{
		TypeMeta:             v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:                 name,
		Nodes:                []v1alpha4.Node{node},
		KubeadmConfigPatches: []string{auditPatch},
	}
}
