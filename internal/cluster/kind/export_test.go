package kind

import (
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	"github.com/labctl/labctl/internal/engine"
)

// LogInfoForTest feeds one of kind's info messages through the adapter.
func LogInfoForTest(p Progress, m string) { (&logger{p: p}).V(0).Info(m) }

// StopBeforeKubernetesForTest is kind's real library whose Create stops
// where kubeadm would start (CreateWithStopBeforeSettingUpKubernetes): the
// node containers run and hold kind's kubeadm config, nothing more.
func StopBeforeKubernetesForTest(e *engine.Engine, p Progress) API {
	return stopBeforeKubernetes{NewAPI(e, p).(*libAPI)}
}

type stopBeforeKubernetes struct{ *libAPI }

func (a stopBeforeKubernetes) Create(cfg *v1alpha4.Cluster, kubeconfigPath string, _ time.Duration) error {
	return a.p.Create(cfg.Name,
		kindcluster.CreateWithV1Alpha4Config(cfg),
		kindcluster.CreateWithKubeconfigPath(kubeconfigPath),
		kindcluster.CreateWithStopBeforeSettingUpKubernetes(true),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false),
	)
}
