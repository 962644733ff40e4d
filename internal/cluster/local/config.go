package local

import (
	_ "embed"
	"fmt"
	"path/filepath"
	"strings"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

// kcmControllers is the smallest set of kube-controller-manager controllers
// the labs need. nodelifecycle is not optional: only it removes the
// not-ready taint that admission puts on every new Node.
var kcmControllers = []string{
	"serviceaccount-controller", "serviceaccount-token-controller", "root-ca-certificate-publisher-controller",
	"namespace-controller", "garbage-collector-controller",
	"deployment-controller", "replicaset-controller", "statefulset-controller", "job-controller",
	"cronjob-controller", "ttl-after-finished-controller", "endpointslice-controller",
	"persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
	"node-lifecycle-controller", "disruption-controller",
}

const (
	nodeName     = "kwok-node-0"
	storageClass = "standard"
	serviceCIDR  = "10.0.0.0/24"
)

type layout struct{ dir string }

func (l layout) file(parts ...string) string {
	return filepath.Join(append([]string{l.dir}, parts...)...)
}
func (l layout) pki() pki                    { return pki{dir: l.file("pki")} }
func (l layout) log(component string) string { return l.file("logs", component+".log") }
func (l layout) kubeconfig(user string) string {
	return l.file("kubeconfigs", user+".kubeconfig")
}
func (l layout) auditLog() string { return l.file("logs", "audit.log") }

// args returns each component's command line.
func (l layout) args(component string, p ports) []string {
	k := l.pki()
	switch component {
	case "etcd":
		return []string{
			"--name=labctl",
			"--data-dir=" + l.file("etcd"),
			// TLS with client certificates on both ports: a process that can
			// connect to 127.0.0.1 (a graded manager) gets nothing from etcd.
			fmt.Sprintf("--listen-client-urls=https://127.0.0.1:%d", p.Etcd),
			fmt.Sprintf("--advertise-client-urls=https://127.0.0.1:%d", p.Etcd),
			"--cert-file=" + k.path("etcd-server.crt"),
			"--key-file=" + k.path("etcd-server.key"),
			"--client-cert-auth=true",
			"--trusted-ca-file=" + k.path("ca.crt"),
			fmt.Sprintf("--listen-peer-urls=https://127.0.0.1:%d", p.EtcdPeer),
			fmt.Sprintf("--initial-advertise-peer-urls=https://127.0.0.1:%d", p.EtcdPeer),
			fmt.Sprintf("--initial-cluster=labctl=https://127.0.0.1:%d", p.EtcdPeer),
			"--peer-cert-file=" + k.path("etcd-server.crt"),
			"--peer-key-file=" + k.path("etcd-server.key"),
			"--peer-client-cert-auth=true",
			"--peer-trusted-ca-file=" + k.path("ca.crt"),
			"--unsafe-no-fsync=true",
			"--quota-backend-bytes=1073741824",
			"--snapshot-count=5000",
			"--log-level=warn",
		}
	case "kube-apiserver":
		return []string{
			fmt.Sprintf("--etcd-servers=https://127.0.0.1:%d", p.Etcd),
			"--etcd-cafile=" + k.path("ca.crt"),
			"--etcd-certfile=" + k.path("etcd-client.crt"),
			"--etcd-keyfile=" + k.path("etcd-client.key"),
			// Every request needs a certificate or a token.
			"--anonymous-auth=false",
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", p.APIServer),
			"--cert-dir=" + k.dir,
			"--tls-cert-file=" + k.path("apiserver.crt"),
			"--tls-private-key-file=" + k.path("apiserver.key"),
			"--client-ca-file=" + k.path("ca.crt"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + k.path("sa.pub"),
			"--service-account-signing-key-file=" + k.path("sa.key"),
			"--service-cluster-ip-range=" + serviceCIDR,
			"--authorization-mode=RBAC",
			"--allow-privileged=true",
			"--audit-policy-file=" + l.file("audit-policy.yaml"),
			"--audit-log-path=" + l.auditLog(),
			"--audit-log-maxsize=100",
			"--audit-log-maxbackup=1",
			"--audit-log-mode=batch",
			"--audit-log-batch-max-wait=200ms",
			"--audit-log-batch-buffer-size=10000",
			"--enable-priority-and-fairness=false",
			"--profiling=false",
			"--endpoint-reconciler-type=none",
			"--event-ttl=1h",
			"--v=1",
		}
	case "kube-controller-manager":
		return []string{
			"--kubeconfig=" + l.kubeconfig("kcm"),
			"--leader-elect=false",
			"--controllers=" + strings.Join(kcmControllers, ","),
			"--service-account-private-key-file=" + k.path("sa.key"),
			"--root-ca-file=" + k.path("ca.crt"),
			"--use-service-account-credentials=false",
			"--secure-port=0",
			"--kube-api-qps=200",
			"--kube-api-burst=400",
			"--concurrent-gc-syncs=20",
			"--v=1",
		}
	case "kube-scheduler":
		return []string{
			"--kubeconfig=" + l.kubeconfig("scheduler"),
			"--leader-elect=false",
			"--secure-port=0",
			"--kube-api-qps=200",
			"--kube-api-burst=400",
			"--v=1",
		}
	case "kwok":
		return []string{
			"--kubeconfig=" + l.kubeconfig("kwok"),
			"--config=" + l.file("kwok-stages.yaml"),
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--cidr=10.244.0.1/24",
			"--node-ip=10.240.0.1",
			"--node-lease-duration-seconds=40",
			fmt.Sprintf("--server-address=127.0.0.1:%d", p.Kwok),
		}
	}
	panic("unknown component " + component)
}
