package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/engine/enginetest"
)

func TestFactsFromInfo(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, engine string
		in           engine.Facts
		want         engine.Facts
	}{
		{"docker, cgroup v2", engine.Docker, engine.Facts{CgroupVersion: "2", Arch: "amd64"},
			engine.Facts{CgroupVersion: "2", Arch: "amd64", RootDir: "/var/lib/docker"}},
		{"docker, cgroup v1 host", engine.Docker, engine.Facts{CgroupVersion: "1", Arch: "amd64"},
			engine.Facts{CgroupVersion: "1", Arch: "amd64", RootDir: "/var/lib/docker"}},
		{"rootless docker on arm", engine.Docker, engine.Facts{CgroupVersion: "2", Arch: "arm64", Rootless: true, RootDir: "/home/u/.local/share/docker"},
			engine.Facts{CgroupVersion: "2", Arch: "arm64", Rootless: true, RootDir: "/home/u/.local/share/docker"}},
		{"docker from snap", engine.Docker, engine.Facts{CgroupVersion: "2", Arch: "amd64", Snap: true},
			engine.Facts{CgroupVersion: "2", Arch: "amd64", Snap: true, RootDir: "/var/snap/docker/common/var-lib-docker"}},
		{"docker's containerd image store", engine.Docker, engine.Facts{CgroupVersion: "2", Arch: "amd64", ContainerdStore: true},
			engine.Facts{CgroupVersion: "2", Arch: "amd64", ContainerdStore: true, RootDir: "/var/lib/docker"}},
		{"rootless podman", engine.Podman, engine.Facts{CgroupVersion: "2", Arch: "arm64", Rootless: true, RootDir: "/home/u/.local/share/containers/storage"},
			engine.Facts{CgroupVersion: "2", Arch: "arm64", Rootless: true, RootDir: "/home/u/.local/share/containers/storage"}},
		{"podman on a cgroup v1 host", engine.Podman, engine.Facts{CgroupVersion: "1", Arch: "amd64"},
			engine.Facts{CgroupVersion: "1", Arch: "amd64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := enginetest.NewRunner().Running(tt.engine, "27.1.0").Info(tt.engine, tt.in)
			e := engine.New(tt.engine, r)
			f, err := e.Facts(ctx)
			require.NoError(t, err)
			assert.Equal(t, tt.want, *f)
			assert.Equal(t, tt.want.CgroupVersion == "1", f.CgroupV1())
			// Asked once per engine.
			_, err = e.Facts(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, r.Called(tt.engine+" info --format"))
		})
	}
}

func TestFactsSnapFromThePath(t *testing.T) {
	r := &snapPath{Runner: enginetest.NewRunner().Running("docker", "27.1.0").Info("docker", engine.Facts{CgroupVersion: "2", Arch: "amd64"})}
	f, err := engine.New("docker", r).Facts(context.Background())
	require.NoError(t, err)
	assert.True(t, f.Snap)
}

// snapPath finds docker where snap installs it.
type snapPath struct{ *enginetest.Runner }

func (s *snapPath) LookPath(file string) (string, error) { return "/snap/bin/" + file, nil }

func TestFactsErrors(t *testing.T) {
	r := enginetest.NewRunner().Running("docker", "27.1.0")
	_, err := engine.New("docker", r).Facts(context.Background())
	require.Error(t, err, "info that is not JSON")
	assert.Contains(t, err.Error(), "cannot read `docker info`")

	r = enginetest.NewRunner().Running("docker", "27.1.0").OnFail("docker info --format", 1, "Cannot connect to the Docker daemon\n")
	_, err = engine.New("docker", r).Facts(context.Background())
	require.Error(t, err)
}

func TestGOARCH(t *testing.T) {
	for in, want := range map[string]string{"x86_64": "amd64", "aarch64": "arm64", "amd64": "amd64", "arm64": "arm64", "armv7l": "arm", "s390x": "s390x", "ppc64le": "ppc64le"} {
		assert.Equal(t, want, engine.GOARCH(in), in)
	}
}

// TestFactsFromTheRealEngine asks the engine on this machine, when one
// answers, and checks the answer is complete.
func TestFactsFromTheRealEngine(t *testing.T) {
	for _, name := range engine.Names {
		p := engine.ProbeEngine(context.Background(), nil, name)
		if !p.Usable() {
			continue
		}
		f, err := engine.New(name, nil).Facts(context.Background())
		require.NoError(t, err)
		assert.Contains(t, []string{"1", "2"}, f.CgroupVersion, "%+v", f)
		assert.NotEmpty(t, f.Arch)
		assert.NotContains(t, f.Arch, "_", "a GOARCH name")
		t.Logf("%s: %+v", name, *f)
		return
	}
	t.Skip("no container engine answers on this machine")
}
