package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Facts are what labctl adapts to about an engine's host: the setups
// students really have (cgroup v1 hosts, rootless engines, Docker from
// snap, Docker's containerd image store, an engine of another
// architecture than labctl's Go).
type Facts struct {
	// CgroupVersion is "1" or "2" ("" when the engine does not say).
	CgroupVersion string
	// Rootless is a rootless Docker or Podman: no host ports below
	// net.ipv4.ip_unprivileged_port_start.
	Rootless bool
	// Arch is the engine's architecture as a GOARCH (amd64, arm64, ...).
	Arch string
	// Snap is Docker installed from snap: its private /tmp and its
	// confinement hide hidden directories of $HOME from the daemon.
	Snap bool
	// ContainerdStore is Docker's containerd image store: an image's ID
	// is its index (or manifest) digest, not the config digest kind's
	// nodes report.
	ContainerdStore bool
	// RootDir is the engine's data directory (DockerRootDir, Podman's
	// graphRoot).
	RootDir string
}

// CgroupV1 reports a cgroup v1 host: kubelet 1.35+ refuses to start there
// unless its configuration says failCgroupV1: false.
func (f *Facts) CgroupV1() bool { return f.CgroupVersion == "1" }

// Facts asks the engine about its host (once; later calls reuse the
// answer).
func (e *Engine) Facts(ctx context.Context) (*Facts, error) {
	e.factsMu.Lock()
	defer e.factsMu.Unlock()
	if e.facts != nil {
		return e.facts, nil
	}
	ctx, cancel := context.WithTimeout(ctx, InfoTimeout)
	defer cancel()
	var f *Facts
	var err error
	if e.Name == Podman {
		f, err = e.podmanFacts(ctx)
	} else {
		f, err = e.dockerFacts(ctx)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("`%s info` did not answer within %s", e.Name, InfoTimeout)
		}
		return nil, err
	}
	e.facts = f
	return f, nil
}

// dockerInfo is the part of `docker info --format '{{json .}}'` labctl
// reads.
type dockerInfo struct {
	CgroupVersion   string
	Architecture    string
	SecurityOptions []string
	DockerRootDir   string
	// DriverStatus is [["driver-type", "io.containerd.snapshotter.v1"]]
	// with the containerd image store.
	DriverStatus [][2]string
}

func (e *Engine) dockerFacts(ctx context.Context) (*Facts, error) {
	out, err := e.run(ctx, "info", "--format", "{{json .}}")
	if err != nil {
		return nil, err
	}
	var info dockerInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, fmt.Errorf("cannot read `%s info`: %w", e.Name, err)
	}
	f := &Facts{
		CgroupVersion: info.CgroupVersion,
		Arch:          GOARCH(info.Architecture),
		RootDir:       info.DockerRootDir,
	}
	for _, o := range info.SecurityOptions {
		if o == "name=rootless" {
			f.Rootless = true
		}
	}
	for _, kv := range info.DriverStatus {
		if kv[0] == "driver-type" && strings.HasPrefix(kv[1], "io.containerd.snapshotter") {
			f.ContainerdStore = true
		}
	}
	// snap's docker runs as /snap/bin/docker and keeps its data under
	// /var/snap/docker.
	if p, err := e.Runner.LookPath(e.Name); err == nil && strings.HasPrefix(p, "/snap/") {
		f.Snap = true
	}
	if strings.HasPrefix(info.DockerRootDir, "/var/snap/docker/") {
		f.Snap = true
	}
	return f, nil
}

// podmanInfo is the part of `podman info --format json` labctl reads.
type podmanInfo struct {
	Host struct {
		Arch          string `json:"arch"`
		CgroupVersion string `json:"cgroupVersion"`
		Security      struct {
			Rootless bool `json:"rootless"`
		} `json:"security"`
	} `json:"host"`
	Store struct {
		GraphRoot string `json:"graphRoot"`
	} `json:"store"`
}

func (e *Engine) podmanFacts(ctx context.Context) (*Facts, error) {
	out, err := e.run(ctx, "info", "--format", "json")
	if err != nil {
		return nil, err
	}
	var info podmanInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, fmt.Errorf("cannot read `%s info`: %w", e.Name, err)
	}
	return &Facts{
		CgroupVersion: strings.TrimPrefix(info.Host.CgroupVersion, "v"),
		Rootless:      info.Host.Security.Rootless,
		Arch:          GOARCH(info.Host.Arch),
		RootDir:       info.Store.GraphRoot,
	}, nil
}

// GOARCH turns an architecture as engines report it (uname's x86_64,
// aarch64, ...) into Go's name for it.
func GOARCH(arch string) string {
	switch a := strings.ToLower(strings.TrimSpace(arch)); a {
	case "x86_64", "x86-64", "amd64":
		return "amd64"
	case "aarch64", "arm64", "armv8", "armv8l":
		return "arm64"
	case "armv7l", "armv7", "armv6l", "arm":
		return "arm"
	case "i386", "i686", "386":
		return "386"
	default:
		return a
	}
}
