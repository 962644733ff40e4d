package doctor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/engine"
)

func TestEngineHostRows(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		engine    string
		facts     engine.Facts
		portStart int
		want      map[string]Verdict
		detail    map[string]string
		fix       map[string]string
	}{
		{"docker on a cgroup v2 host", engine.Docker, engine.Facts{CgroupVersion: "2", Arch: "amd64"}, 1024,
			map[string]Verdict{"cgroup version": Pass, "Rootless engine": Pass, "Docker from snap": Pass, "Docker image store": Pass},
			map[string]string{"Docker image store": "classic"}, nil},
		{"cgroup v1 host", engine.Docker, engine.Facts{CgroupVersion: "1", Arch: "amd64"}, 1024,
			map[string]Verdict{"cgroup version": Warn},
			map[string]string{"cgroup version": "failCgroupV1: false"},
			map[string]string{"cgroup version": "systemd.unified_cgroup_hierarchy=1"}},
		{"rootless podman, privileged ports closed", engine.Podman, engine.Facts{CgroupVersion: "2", Arch: "arm64", Rootless: true}, 1024,
			map[string]Verdict{"cgroup version": Pass, "Rootless engine": Warn},
			map[string]string{"Rootless engine": "rootless podman cannot publish ports below 1024: a new kind cluster's ingress gets ports 8080/8443"},
			map[string]string{"Rootless engine": "net.ipv4.ip_unprivileged_port_start=80"}},
		{"rootless docker, port 80 allowed", engine.Docker, engine.Facts{CgroupVersion: "2", Arch: "amd64", Rootless: true}, 80,
			map[string]Verdict{"Rootless engine": Pass}, map[string]string{"Rootless engine": "allows ports 80/443"}, nil},
		{"docker from snap", engine.Docker, engine.Facts{CgroupVersion: "2", Arch: "amd64", Snap: true}, 1024,
			map[string]Verdict{"Docker from snap": Warn}, map[string]string{"Docker from snap": "~/labctl/kind"}, map[string]string{"Docker from snap": "docs.docker.com"}},
		{"docker's containerd image store", engine.Docker, engine.Facts{CgroupVersion: "2", Arch: "amd64", ContainerdStore: true}, 1024,
			map[string]Verdict{"Docker image store": Pass}, map[string]string{"Docker image store": "containerd: image IDs are index digests"}, nil},
		{"engine without a cgroup version", engine.Podman, engine.Facts{Arch: "amd64"}, 1024,
			map[string]Verdict{"cgroup version": Skip}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, false)
			e.o.Engine = tt.engine
			e.r.Running(tt.engine, "27.1.0").Info(tt.engine, tt.facts)
			e.o.UnprivilegedPortStart = func() int { return tt.portStart }
			checks := byName(Run(ctx, e.o))
			for name, want := range tt.want {
				require.Contains(t, checks, name)
				assert.Equal(t, want, checks[name].Status, "%s: %s", name, checks[name].Detail)
			}
			for name, want := range tt.detail {
				assert.Contains(t, checks[name].Detail, want, name)
			}
			for name, want := range tt.fix {
				assert.Contains(t, checks[name].Fix, want, name)
			}
			if tt.engine == engine.Podman {
				assert.NotContains(t, checks, "Docker from snap")
				assert.NotContains(t, checks, "Docker image store")
			}
		})
	}
}

func TestEngineHostUnreadable(t *testing.T) {
	e := newEnv(t, false)
	e.o.Engine = "docker"
	e.r.Running("docker", "27.1.0").OnFail("docker info --format {{json .}}", 1, "permission denied\n")
	c := byName(Run(context.Background(), e.o))["Engine host"]
	assert.Equal(t, Warn, c.Status)
	assert.Contains(t, c.Detail, "cannot read `docker info`")
}

func TestNoEngineNoHostRows(t *testing.T) {
	e := newEnv(t, false)
	checks := byName(Run(context.Background(), e.o))
	assert.NotContains(t, checks, "cgroup version")
	assert.NotContains(t, checks, "Engine host")
}

// TestEngineHostRealEngine runs doctor's engine probes against the engine
// on this machine, when one answers.
func TestEngineHostRealEngine(t *testing.T) {
	var eng *engine.Engine
	for _, n := range engine.Names {
		if p := engine.ProbeEngine(context.Background(), nil, n); p.Usable() {
			eng = engine.New(n, nil)
			break
		}
	}
	if eng == nil {
		t.Skip("no container engine answers on this machine")
	}
	rows := checkEngineHost(context.Background(), &Options{}, eng)
	require.NotEmpty(t, rows)
	for _, c := range rows {
		t.Logf("%s\t%s\t%s\t%s", c.Name, c.Status, c.Detail, c.Fix)
		assert.NotEqual(t, "Engine host", c.Name, "the real engine's info is readable: %s", c.Detail)
		assert.NotEqual(t, Fail, c.Status)
	}
	byN := byName(rows)
	assert.Contains(t, []Verdict{Pass, Warn}, byN["cgroup version"].Status, "a real engine reports its cgroup version")
}
