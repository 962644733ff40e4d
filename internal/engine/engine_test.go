package engine_test

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/engine/enginetest"
	"github.com/labctl/labctl/internal/userr"
)

func env(vals map[string]string) func(string) string {
	return func(k string) string { return vals[k] }
}

func TestDetectOrder(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		runner   func() *enginetest.Runner
		explicit string
		env      map[string]string
		want     string
	}{
		{"docker first when both run", func() *enginetest.Runner {
			return enginetest.NewRunner().Running("docker", "27.1.0").Running("podman", "5.0.0")
		}, "", nil, "docker"},
		{"podman when docker's daemon is down", func() *enginetest.Runner {
			return enginetest.NewRunner().DaemonDown("docker").Running("podman", "5.0.0")
		}, "", nil, "podman"},
		{"podman when docker is not installed", func() *enginetest.Runner {
			return enginetest.NewRunner().Running("podman", "5.0.0")
		}, "", nil, "podman"},
		{"KIND_EXPERIMENTAL_PROVIDER wins over detection", func() *enginetest.Runner {
			return enginetest.NewRunner().Running("docker", "27.1.0").Running("podman", "5.0.0")
		}, "", map[string]string{engine.EnvProvider: "podman"}, "podman"},
		{"--engine wins over KIND_EXPERIMENTAL_PROVIDER", func() *enginetest.Runner {
			return enginetest.NewRunner().Running("docker", "27.1.0").Running("podman", "5.0.0")
		}, "docker", map[string]string{engine.EnvProvider: "podman"}, "docker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.runner()
			e, err := engine.Detect(ctx, r, engine.Options{Explicit: tt.explicit, Getenv: env(tt.env)})
			require.NoError(t, err)
			assert.Equal(t, tt.want, e.Name)
			assert.NotEmpty(t, e.Version)
			assert.Same(t, r, e.Runner)
		})
	}
}

func TestDetectStopsAtFirstWorkingEngine(t *testing.T) {
	r := enginetest.NewRunner().Running("docker", "27.1.0").Running("podman", "5.0.0")
	_, err := engine.Detect(context.Background(), r, engine.Options{Getenv: env(nil)})
	require.NoError(t, err)
	assert.Equal(t, 0, r.Called("podman"), "podman must not be asked when docker works")
	assert.Equal(t, []string{"docker info --format {{.ServerVersion}}"}, r.Calls())
}

func TestDetectErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		runner   *enginetest.Runner
		explicit string
		env      map[string]string
		code     int
		contains []string
	}{
		{"no engine at all", enginetest.NewRunner(), "", nil, userr.ExitEnvironment,
			[]string{"no container engine", "--provider local"}},
		{"docker installed, daemon down", enginetest.NewRunner().DaemonDown("docker"), "", nil, userr.ExitEnvironment,
			[]string{"docker is installed but not running", "Cannot connect to the Docker daemon", "systemctl start docker", "--provider local"}},
		{"both installed, both down: docker reported", enginetest.NewRunner().DaemonDown("docker").DaemonDown("podman"), "", nil, userr.ExitEnvironment,
			[]string{"docker is installed but not running"}},
		{"--engine podman not installed", enginetest.NewRunner().Running("docker", "27"), "podman", nil, userr.ExitEnvironment,
			[]string{"podman is not installed", "--engine"}},
		{"--engine podman down", enginetest.NewRunner().DaemonDown("podman"), "podman", nil, userr.ExitEnvironment,
			[]string{"podman is installed but not running", "podman machine start"}},
		{"unsupported --engine", enginetest.NewRunner(), "containerd", nil, userr.ExitUsage,
			[]string{"--engine=containerd", "docker or podman"}},
		{"KIND_EXPERIMENTAL_PROVIDER=nerdctl", enginetest.NewRunner().Running("docker", "27"), "", map[string]string{engine.EnvProvider: "nerdctl"}, userr.ExitUsage,
			[]string{"KIND_EXPERIMENTAL_PROVIDER=nerdctl", "unset"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engine.Detect(ctx, tt.runner, engine.Options{Explicit: tt.explicit, Getenv: env(tt.env)})
			require.Error(t, err)
			msg := userr.Message(err)
			assert.NotContains(t, msg, "\n", "one line")
			for _, c := range tt.contains {
				assert.Contains(t, msg, c)
			}
			assert.Equal(t, tt.code, userr.Code(err))
		})
	}
}

func TestInfoEmptyVersionIsNotRunning(t *testing.T) {
	r := enginetest.NewRunner("docker").OnOutput("docker info", "\n")
	_, err := engine.New("docker", r).Info(context.Background())
	require.Error(t, err)
}

func TestReason(t *testing.T) {
	ctx := context.Background()
	r := enginetest.NewRunner().DaemonDown("docker")
	probes := []engine.Probe{engine.ProbeEngine(ctx, r, "docker"), engine.ProbeEngine(ctx, r, "podman")}
	assert.Equal(t, "no container engine running: docker not running", engine.Reason(probes))
	assert.Equal(t, "no container engine installed", engine.Reason([]engine.Probe{{Name: "docker"}}))
}

func TestLocalName(t *testing.T) {
	podman := engine.New("podman", enginetest.NewRunner())
	docker := engine.New("docker", enginetest.NewRunner())
	for ref, want := range map[string]string{
		"postgres-operator:latest":           "localhost/postgres-operator:latest",
		"example/postgres-operator:v1":       "localhost/example/postgres-operator:v1",
		"localhost/postgres-operator:latest": "localhost/postgres-operator:latest",
		"quay.io/me/op:v1":                   "quay.io/me/op:v1",
		"registry:5000/op":                   "registry:5000/op",
	} {
		assert.Equal(t, want, podman.LocalName(ref), ref)
		assert.Equal(t, ref, docker.LocalName(ref), ref)
	}
}

func TestImageIDNormalised(t *testing.T) {
	r := enginetest.NewRunner("podman").OnOutput("podman image inspect", "7bb205450ec3\n")
	id, err := engine.New("podman", r).ImageID(context.Background(), "localhost/x:latest")
	require.NoError(t, err)
	assert.Equal(t, "sha256:7bb205450ec3", id)

	r = enginetest.NewRunner("podman").OnFail("podman image inspect", 125, "Error: x: image not known")
	_, err = engine.New("podman", r).ImageID(context.Background(), "x")
	assert.True(t, errors.Is(err, engine.ErrNoImage))
}

func TestSaveStreamsTheArchive(t *testing.T) {
	for name, want := range map[string]string{
		"podman": "podman save --format docker-archive img",
		"docker": "docker save img",
	} {
		r := enginetest.NewRunner(name).OnOutput(name+" save", "ARCHIVE")
		var out strings.Builder
		require.NoError(t, engine.New(name, r).Save(context.Background(), "img", &out))
		assert.Equal(t, []string{want}, r.Calls(), "no -o: the engine's /tmp may not be labctl's")
		assert.Equal(t, "ARCHIVE", out.String())
	}
}

func TestDockerBuildsWithoutAttestations(t *testing.T) {
	for name, want := range map[string][]string{"docker": {"BUILDX_NO_DEFAULT_ATTESTATIONS=1"}, "podman": nil} {
		var env []string
		r := enginetest.NewRunner(name).On(name+" build", func(c engine.Cmd) error { env = c.Env; return nil })
		require.NoError(t, engine.New(name, r).Build(context.Background(), "op:latest", "Dockerfile", ".", io.Discard))
		assert.Equal(t, want, env, name)
	}
}

func TestInspectContainer(t *testing.T) {
	r := enginetest.NewRunner("docker").
		OnOutput("docker inspect --type container --format {{.State.Running}}{{range $k, $v := .Config.Labels}}\n{{$k}}={{$v}}{{end}} a", "true\nio.x-k8s.kind.cluster=course\nio.x-k8s.kind.role=control-plane\n").
		OnFail("docker inspect --type container --format {{.State.Running}}{{range $k, $v := .Config.Labels}}\n{{$k}}={{$v}}{{end}} b", 1, "Error: No such container: b\n")
	e := engine.New("docker", r)
	c, err := e.InspectContainer(context.Background(), "a")
	require.NoError(t, err)
	assert.True(t, c.Exists)
	assert.True(t, c.Running)
	assert.Equal(t, "course", c.Labels["io.x-k8s.kind.cluster"])
	c, err = e.InspectContainer(context.Background(), "b")
	require.NoError(t, err)
	assert.False(t, c.Exists)
}

func TestLastLines(t *testing.T) {
	assert.Equal(t, []string{"b", "c"}, engine.LastLines("a\n\nb\r\nc\n\n", 2))
	assert.Equal(t, "c", engine.LastLine("a\nc\n"))
	assert.Equal(t, "", engine.LastLine(""))
}

// TestRealDockerClientWithoutDaemon runs the real docker client when it is
// installed but no daemon answers (as on the machine this was written
// on): the probe must say so, not hang or claim success.
func TestRealDockerClientWithoutDaemon(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker client not installed")
	}
	p := engine.ProbeEngine(context.Background(), engine.OSRunner{}, "docker")
	if p.Usable() {
		t.Skipf("a Docker daemon answers here (server %s): nothing to test", p.Version)
	}
	require.True(t, p.Installed)
	require.Error(t, p.Err)
	var ee *engine.ExitError
	require.ErrorAs(t, p.Err, &ee)
	assert.True(t, strings.Contains(ee.Stderr, "daemon") || strings.Contains(ee.Stderr, "connect"), ee.Stderr)
}
