package doctor

import (
	"context"
	"fmt"

	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/userr"
)

// checkEngineHost reports what labctl adapts to about the engine's host:
// cgroup version, rootless, Docker from snap, Docker's image store. Each
// row says what labctl does about it and what the user can do.
func checkEngineHost(ctx context.Context, o *Options, e *engine.Engine) []Probe {
	if e == nil {
		return nil
	}
	f, err := e.Facts(ctx)
	if err != nil {
		return []Probe{{Name: "Engine host", Status: Warn, Detail: fmt.Sprintf("cannot read `%s info`: %s", e.Name, userr.Message(err)),
			Fix: fmt.Sprintf("check that `%s info` works", e.Name)}}
	}
	out := []Probe{checkCgroup(f), checkRootless(o, e, f)}
	if e.Name == engine.Docker {
		out = append(out, checkSnap(f), checkImageStore(f))
	}
	return out
}

func checkCgroup(f *engine.Facts) Probe {
	c := Probe{Name: "cgroup version"}
	switch f.CgroupVersion {
	case "2":
		c.Status, c.Detail = Pass, "v2"
	case "1":
		c.Status = Warn
		c.Detail = "v1: kubelet 1.35+ refuses it by default; labctl sets failCgroupV1: false in the kind cluster's kubelet configuration"
		c.Fix = "move the host to cgroup v2 when you can (kernel parameter systemd.unified_cgroup_hierarchy=1; WSL2: a current WSL kernel)"
	default:
		c.Status, c.Detail = Skip, "the engine does not say"
	}
	return c
}

func checkRootless(o *Options, e *engine.Engine, f *engine.Facts) Probe {
	c := Probe{Name: "Rootless engine"}
	if !f.Rootless {
		c.Status, c.Detail = Pass, "no: the kind cluster gets ports 80/443"
		return c
	}
	start := o.UnprivilegedPortStart
	if start == nil {
		start = kind.UnprivilegedPortStart
	}
	if n := start(); n > 80 {
		c.Status = Warn
		c.Detail = fmt.Sprintf("rootless %s cannot publish ports below %d: a new kind cluster's ingress gets ports 8080/8443 instead of 80/443", e.Name, n)
		c.Fix = "`sudo sysctl net.ipv4.ip_unprivileged_port_start=80` (persist it in /etc/sysctl.d), then `labctl reset --cluster`"
		return c
	}
	c.Status, c.Detail = Pass, "rootless, and net.ipv4.ip_unprivileged_port_start allows ports 80/443"
	return c
}

func checkSnap(f *engine.Facts) Probe {
	c := Probe{Name: "Docker from snap"}
	if !f.Snap {
		c.Status, c.Detail = Pass, "no"
		return c
	}
	c.Status = Warn
	c.Detail = "yes: its private /tmp and confinement hide files from it; labctl streams images through its own pipe and keeps the cluster's audit policy in ~/labctl/kind"
	c.Fix = "keep ~/labctl/kind while the cluster exists; Docker from your distribution's packages or docs.docker.com avoids snap's confinement"
	return c
}

func checkImageStore(f *engine.Facts) Probe {
	c := Probe{Name: "Docker image store", Status: Pass}
	if !f.ContainerdStore {
		c.Detail = "classic (image IDs are config digests, as kind's nodes report them)"
		return c
	}
	c.Detail = "containerd: image IDs are index digests; labctl compares the config digests the nodes report and builds without attestation manifests"
	return c
}
