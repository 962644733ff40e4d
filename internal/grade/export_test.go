package grade

import (
	"os/exec"

	"github.com/labctl/labctl/internal/cgroup"
)

// BoxEnvVar marks a box's child labctl (tests start their own).
const BoxEnvVar = boxEnvVar

// LaunchBox starts cmd as startBox starts a box: in its namespaces and
// a cgroup with lim, then job on its stdin.
func LaunchBox(cmd *exec.Cmd, name string, lim cgroup.Limits, job []byte) (cgroup.Group, string, error) {
	cmd.SysProcAttr = boxProcAttr()
	return launchBox(cmd, name, &lim, job)
}

// RemoveBoxGroup is what startBox does once its box ended.
func RemoveBoxGroup(g cgroup.Group) { removeGroup(g) }
