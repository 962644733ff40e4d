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

// cgroupV1Patch keeps the kubelet starting on cgroup v1 hosts (RHEL/Rocky
// 8, Ubuntu 20.04, older WSL2): kubelet 1.35+ refuses cgroup v1 unless
// its configuration says so, and kind v0.33 only warns about it. Without
// apiVersion it applies to whatever KubeletConfiguration kind generates.
const cgroupV1Patch = `kind: KubeletConfiguration
failCgroupV1: false
`

// ListenAddress is where kind publishes the ingress ports on the host
// (kind's own default, made explicit so labctl's port probe checks the
// same address).
const ListenAddress = "0.0.0.0"

// ConfigOptions describe the course cluster for ClusterConfig.
type ConfigOptions struct {
	Name      string
	NodeImage string
	// PolicyHostPath is the audit policy on the host (a path the engine
	// can see).
	PolicyHostPath string
	// HTTPPort and HTTPSPort are the host ports mapped to the node's 80
	// and 443 (0: no mapping).
	HTTPPort, HTTPSPort int
	// CgroupV1 adds the kubelet patch a cgroup v1 host needs.
	CgroupV1 bool
}

// ClusterConfig is the kind configuration of the course cluster: one
// control-plane node labelled ingress-ready=true with the node's ports 80
// and 443 published on the host (80 and 443, as the course's setup script
// does, unless the host cannot give them), API audit logging with the
// policy file at PolicyHostPath, and on cgroup v1 hosts the kubelet patch
// that lets it start there.
func ClusterConfig(o ConfigOptions) *v1alpha4.Cluster {
	node := v1alpha4.Node{
		Role:   v1alpha4.ControlPlaneRole,
		Image:  o.NodeImage,
		Labels: map[string]string{"ingress-ready": "true"},
		ExtraMounts: []v1alpha4.Mount{{
			HostPath:      o.PolicyHostPath,
			ContainerPath: policyPath,
			Readonly:      true,
		}},
	}
	for _, m := range []struct{ host, container int }{{o.HTTPPort, 80}, {o.HTTPSPort, 443}} {
		if m.host != 0 {
			node.ExtraPortMappings = append(node.ExtraPortMappings, v1alpha4.PortMapping{
				ContainerPort: int32(m.container), HostPort: int32(m.host), ListenAddress: ListenAddress, Protocol: v1alpha4.PortMappingProtocolTCP,
			})
		}
	}
	patches := []string{auditPatch}
	if o.CgroupV1 {
		patches = append(patches, cgroupV1Patch)
	}
	return &v1alpha4.Cluster{
		TypeMeta:             v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:                 o.Name,
		Nodes:                []v1alpha4.Node{node},
		KubeadmConfigPatches: patches,
	}
}
