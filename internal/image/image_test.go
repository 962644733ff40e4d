package image_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/engine/enginetest"
	"github.com/labctl/labctl/internal/image"
	"github.com/labctl/labctl/internal/userr"
)

func TestValidateRef(t *testing.T) {
	for _, ok := range []string{
		"postgres-operator:latest", "postgres-operator", "localhost/postgres-operator:latest",
		"quay.io/team/op:v1.2.3", "registry.local:5000/op:dev_1", "a/b/c", "final-operator:v1.0.0",
	} {
		assert.NoError(t, image.ValidateRef(ok), ok)
	}
	for _, bad := range []string{
		"", "Postgres-Operator:latest", "op:", "op:bad tag", "-op", "op@sha256:abc", "op::1", "/op", "op/", "op:" + strings.Repeat("x", 129),
	} {
		err := image.ValidateRef(bad)
		require.Error(t, err, bad)
		assert.Equal(t, userr.ExitUsage, userr.Code(err))
		assert.Contains(t, userr.Message(err), "invalid image name")
		assert.Contains(t, userr.Message(err), "e.g. postgres-operator:latest")
	}
}

func TestNormalize(t *testing.T) {
	assert.Equal(t, "docker.io/library/op:latest", image.Normalize("op"))
	assert.Equal(t, "docker.io/library/op:v1", image.Normalize("op:v1"))
	assert.Equal(t, "docker.io/me/op:v1", image.Normalize("me/op:v1"))
	assert.Equal(t, "localhost/op:latest", image.Normalize("localhost/op:latest"))
	assert.Equal(t, "registry:5000/op:latest", image.Normalize("registry:5000/op"))
}

// project writes a minimal kubebuilder-like project.
func project(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
	}
	return dir
}

// builder scripts `<engine> build` to store an image under the engine's
// local name.
func builder(r *enginetest.Runner, store *enginetest.Store, name string, e *engine.Engine) {
	r.On(name+" build", func(c engine.Cmd) error {
		tag := c.Args[2]
		fmt.Fprintf(c.Stdout, "STEP 1/4: FROM scratch\nCOMMIT %s\n", tag)
		store.Put(enginetest.Image{Ref: e.LocalName(tag), Config: []byte(`{"config":"` + tag + `"}`)})
		return nil
	})
}

func TestBuildDockerfile(t *testing.T) {
	dir := project(t, "Dockerfile", "go.mod", "cmd/main.go")
	r := enginetest.NewRunner("docker")
	e := engine.New("docker", r)
	store := &enginetest.Store{}
	store.Attach(r, "docker")
	builder(r, store, "docker", e)
	img, err := image.Build(context.Background(), image.BuildOptions{Engine: e, Dir: dir, Tag: "postgres-operator:latest", Mode: image.ModeDockerfile})
	require.NoError(t, err)
	assert.Equal(t, "postgres-operator:latest", img.Ref)
	want, _ := store.Get("postgres-operator:latest")
	assert.Equal(t, want.ID(), img.ID)
	assert.Equal(t, "docker build -t postgres-operator:latest -f "+filepath.Join(dir, "Dockerfile")+" "+dir, r.Calls()[0])
}

func TestBuildPodmanUsesLocalhostName(t *testing.T) {
	dir := project(t, "Dockerfile", "go.mod")
	r := enginetest.NewRunner("podman")
	e := engine.New("podman", r)
	store := &enginetest.Store{IDWithoutPrefix: true}
	store.Attach(r, "podman")
	builder(r, store, "podman", e)
	img, err := image.Build(context.Background(), image.BuildOptions{Engine: e, Dir: dir, Tag: "postgres-operator:latest"})
	require.NoError(t, err)
	assert.Equal(t, "localhost/postgres-operator:latest", img.Ref)
	assert.True(t, strings.HasPrefix(img.ID, "sha256:"), img.ID)
	assert.Contains(t, r.Calls(), "podman image inspect --format {{.Id}} localhost/postgres-operator:latest")
}

func TestBuildErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("no Dockerfile", func(t *testing.T) {
		dir := project(t, "go.mod")
		r := enginetest.NewRunner("docker")
		_, err := image.Build(ctx, image.BuildOptions{Engine: engine.New("docker", r), Dir: dir, Tag: "op:latest"})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "has no Dockerfile")
		assert.Contains(t, userr.Message(err), "LABCTL_BUILD=fast")
		assert.Empty(t, r.Calls(), "nothing run")
	})
	t.Run("invalid image name", func(t *testing.T) {
		r := enginetest.NewRunner("docker")
		_, err := image.Build(ctx, image.BuildOptions{Engine: engine.New("docker", r), Dir: project(t, "Dockerfile"), Tag: "Bad_Name:latest"})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), `invalid image name "Bad_Name:latest"`)
		assert.Empty(t, r.Calls())
	})
	t.Run("build fails: last lines of the log", func(t *testing.T) {
		dir := project(t, "Dockerfile")
		log := "STEP 1/9: FROM golang:1.26 AS builder\nSTEP 7/9: RUN go build -o manager cmd/main.go\n" +
			"internal/controller/database_controller.go:42:2: undefined: foo\n" +
			"Error: building at STEP \"RUN go build\": exit status 1\n"
		r := enginetest.NewRunner("docker").On("docker build", func(c engine.Cmd) error { return enginetest.Fail(c, 1, log) })
		_, err := image.Build(ctx, image.BuildOptions{Engine: engine.New("docker", r), Dir: dir, Tag: "op:latest"})
		require.Error(t, err)
		msg := userr.Message(err)
		assert.NotContains(t, msg, "\n")
		assert.Contains(t, msg, "`docker build` of op:latest failed")
		assert.Contains(t, msg, "undefined: foo")
		assert.Contains(t, msg, `building at STEP "RUN go build"`)
		assert.Contains(t, msg, "docker build -t op:latest .")
		var buf strings.Builder
		image.PrintLogTail(&buf, err)
		assert.Contains(t, buf.String(), "FROM golang:1.26")
	})
	t.Run("built image missing from the engine", func(t *testing.T) {
		r := enginetest.NewRunner("docker").OnOutput("docker build", "").OnFail("docker image inspect", 1, "Error: No such image: op:latest")
		_, err := image.Build(ctx, image.BuildOptions{Engine: engine.New("docker", r), Dir: project(t, "Dockerfile"), Tag: "op:latest"})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "cannot find op:latest")
	})
}

func TestBuildFast(t *testing.T) {
	dir := project(t, "go.mod", "cmd/main.go")
	r := enginetest.NewRunner("podman", "go")
	e := engine.New("podman", r)
	store := &enginetest.Store{}
	store.Attach(r, "podman")
	var goCmd engine.Cmd
	r.On("go build", func(c engine.Cmd) error {
		goCmd = c
		return os.WriteFile(c.Args[2], []byte("ELF"), 0o755)
	})
	var dockerfile string
	var contextFiles []string
	r.On("podman build", func(c engine.Cmd) error {
		raw, err := os.ReadFile(c.Args[4])
		if err != nil {
			return err
		}
		dockerfile = string(raw)
		entries, _ := os.ReadDir(c.Args[5])
		for _, en := range entries {
			contextFiles = append(contextFiles, en.Name())
		}
		store.Put(enginetest.Image{Ref: "localhost/" + c.Args[2], Config: []byte("{}")})
		return nil
	})
	img, err := image.Build(context.Background(), image.BuildOptions{Engine: e, Dir: dir, Tag: "op:dev", Mode: image.ModeFast, Arch: "arm64"})
	require.NoError(t, err)
	assert.Equal(t, "localhost/op:dev", img.Ref)
	assert.Equal(t, dir, goCmd.Dir)
	assert.Equal(t, "./cmd", goCmd.Args[len(goCmd.Args)-1])
	assert.ElementsMatch(t, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64"}, goCmd.Env)
	assert.Equal(t, "FROM scratch\nCOPY manager /manager\nUSER 65532:65532\nENTRYPOINT [\"/manager\"]\n", dockerfile)
	assert.ElementsMatch(t, []string{"Dockerfile", "manager"}, contextFiles)
	_, err = os.Stat(filepath.Dir(goCmd.Args[2]))
	assert.True(t, errors.Is(err, os.ErrNotExist), "temporary context removed")
}

func TestBuildFastErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("no main package", func(t *testing.T) {
		r := enginetest.NewRunner("docker", "go")
		_, err := image.Build(ctx, image.BuildOptions{Engine: engine.New("docker", r), Dir: project(t, "go.mod"), Tag: "op", Mode: image.ModeFast})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "has no cmd/main.go")
	})
	t.Run("no go", func(t *testing.T) {
		r := enginetest.NewRunner("docker")
		_, err := image.Build(ctx, image.BuildOptions{Engine: engine.New("docker", r), Dir: project(t, "cmd/main.go"), Tag: "op", Mode: image.ModeFast})
		require.Error(t, err)
		assert.Equal(t, userr.ExitEnvironment, userr.Code(err))
		assert.Contains(t, userr.Message(err), "Go is not installed")
	})
	t.Run("compile error", func(t *testing.T) {
		r := enginetest.NewRunner("docker", "go").On("go build", func(c engine.Cmd) error {
			return enginetest.Fail(c, 1, "# github.com/example/postgres-operator/cmd\ncmd/main.go:10:2: undefined: setupWebhooks\n")
		})
		_, err := image.Build(ctx, image.BuildOptions{Engine: engine.New("docker", r), Dir: project(t, "main.go"), Tag: "op", Mode: image.ModeFast})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "`go build` of the manager failed: # github.com/example/postgres-operator/cmd | cmd/main.go:10:2: undefined: setupWebhooks")
		assert.Contains(t, userr.Message(err), "go build .")
		assert.Equal(t, 0, r.Called("docker build"))
	})
}

func TestParseMode(t *testing.T) {
	m, err := image.ParseMode("")
	require.NoError(t, err)
	assert.Equal(t, image.ModeDockerfile, m)
	m, err = image.ParseMode("fast")
	require.NoError(t, err)
	assert.Equal(t, image.ModeFast, m)
	_, err = image.ParseMode("quick")
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
}

// loadEnv is a fake engine holding one image and fake nodes, all tracing
// into one ordered log.
type loadEnv struct {
	r     *enginetest.Runner
	e     *engine.Engine
	store *enginetest.Store
	nodes []*enginetest.Node
	mu    sync.Mutex
	trace []string
}

func newLoadEnv(t *testing.T, engineName, ref string, nodeNames ...string) *loadEnv {
	t.Helper()
	le := &loadEnv{r: enginetest.NewRunner(engineName), store: &enginetest.Store{IDWithoutPrefix: engineName == "podman"}}
	le.e = engine.New(engineName, le.r)
	le.store.Attach(le.r, engineName)
	le.r.Trace = le.add
	le.store.Put(enginetest.Image{Ref: ref, Config: []byte(`{"architecture":"amd64"}`), Files: map[string]string{"manager": "ELF"}})
	for _, n := range nodeNames {
		node := enginetest.NewNode(n)
		node.Trace = le.add
		le.nodes = append(le.nodes, node)
	}
	return le
}

func (le *loadEnv) add(s string) {
	le.mu.Lock()
	defer le.mu.Unlock()
	le.trace = append(le.trace, s)
}

func (le *loadEnv) kindNodes() []nodes.Node {
	var out []nodes.Node
	for _, n := range le.nodes {
		out = append(out, n)
	}
	return out
}

func (le *loadEnv) id(ref string) string {
	img, _ := le.store.Get(ref)
	return img.ID()
}

// summary keeps the trace lines that matter for ordering.
func (le *loadEnv) summary() []string {
	var out []string
	for _, l := range le.trace {
		switch {
		case strings.Contains(l, " save "):
			out = append(out, "save")
		case strings.Contains(l, "ctr --namespace=k8s.io images import"):
			out = append(out, strings.SplitN(l, ":", 2)[0]+": import")
		case strings.Contains(l, "crictl inspecti"):
			out = append(out, strings.SplitN(l, ":", 2)[0]+": inspecti")
		}
	}
	return out
}

func TestLoadDockerSequence(t *testing.T) {
	le := newLoadEnv(t, "docker", "postgres-operator:latest", "course-control-plane", "course-worker")
	res, err := image.Load(context.Background(), image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "postgres-operator:latest"})
	require.NoError(t, err)
	assert.Equal(t, "postgres-operator:latest", res.Ref)
	assert.Equal(t, le.id("postgres-operator:latest"), res.ID)
	assert.Equal(t, []string{"course-control-plane", "course-worker"}, res.LoadedInto)
	assert.Empty(t, res.Skipped)
	assert.Equal(t, []string{
		"course-control-plane: inspecti", "course-worker: inspecti", // fast-path check
		"save",
		"course-control-plane: inspecti", "course-control-plane: import", "course-control-plane: inspecti", // load, confirm
		"course-worker: inspecti", "course-worker: import", "course-worker: inspecti",
	}, le.summary())
	for _, n := range le.nodes {
		assert.Equal(t, res.ID, n.ImageID("docker.io/library/postgres-operator:latest"))
	}
}

func TestLoadPodmanLocalhostName(t *testing.T) {
	le := newLoadEnv(t, "podman", "localhost/postgres-operator:latest", "course-control-plane")
	// The student passes the name they built with; Podman stored it under
	// localhost/, and that is the name the node (and the Deployment) get.
	res, err := image.Load(context.Background(), image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "postgres-operator:latest"})
	require.NoError(t, err)
	assert.Equal(t, "localhost/postgres-operator:latest", res.Ref)
	var save string
	for _, c := range le.r.Calls() {
		if strings.HasPrefix(c, "podman save") {
			save = c
		}
	}
	assert.Regexp(t, `^podman save --format docker-archive localhost/postgres-operator:latest$`, save)
	n := le.nodes[0]
	assert.Equal(t, res.ID, n.ImageID("localhost/postgres-operator:latest"))
	assert.Empty(t, n.ImageID("postgres-operator:latest"), "docker.io/library/postgres-operator is not what the node has")
}

func TestLoadSkipsNodesWithSameID(t *testing.T) {
	le := newLoadEnv(t, "docker", "op:latest", "a", "b")
	id := le.id("op:latest")
	le.nodes[0].SetImage("op:latest", id)
	le.nodes[1].SetImage("op:latest", id)
	res, err := image.Load(context.Background(), image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "op:latest"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, res.Skipped)
	assert.Empty(t, res.LoadedInto)
	assert.Equal(t, 0, le.r.Called("docker save"), "nothing saved when every node has the image")
	assert.Equal(t, 0, le.nodes[0].Imports()+le.nodes[1].Imports())

	// One node stale: only that one is loaded.
	le.nodes[1].SetImage("op:latest", "sha256:old")
	res, err = image.Load(context.Background(), image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "op:latest"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Skipped)
	assert.Equal(t, []string{"b"}, res.LoadedInto)
	assert.Equal(t, 0, le.nodes[0].Imports())
	assert.Equal(t, 1, le.nodes[1].Imports())
}

func TestLoadPodmanConvertedConfig(t *testing.T) {
	// Podman may rewrite the config when saving a docker-archive: the node
	// then holds the archive's ID, which never equals the engine's. The
	// node that already has the archive's ID is still skipped.
	le := newLoadEnv(t, "podman", "localhost/op:latest", "a")
	le.store.SaveConfig = func(enginetest.Image) []byte { return []byte(`{"converted":true}`) }
	res, err := image.Load(context.Background(), image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "localhost/op:latest"})
	require.NoError(t, err)
	assert.NotEqual(t, le.id("localhost/op:latest"), res.ID)
	assert.Equal(t, 1, le.nodes[0].Imports())

	res, err = image.Load(context.Background(), image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "localhost/op:latest"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Skipped)
	assert.Equal(t, 1, le.nodes[0].Imports(), "not imported again")
}

func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("image not in the engine", func(t *testing.T) {
		le := newLoadEnv(t, "docker", "op:latest", "a")
		_, err := image.Load(ctx, image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "other:latest"})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "docker has no image other:latest")
	})
	t.Run("no nodes", func(t *testing.T) {
		le := newLoadEnv(t, "docker", "op:latest")
		_, err := image.Load(ctx, image.LoadOptions{Engine: le.e, Ref: "op:latest"})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "no nodes")
	})
	t.Run("save fails", func(t *testing.T) {
		le := newLoadEnv(t, "docker", "op:latest", "a")
		le.r.OnFail("docker save", 1, "Error: write /tmp/x: no space left on device")
		_, err := image.Load(ctx, image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "op:latest"})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "`docker save` of op:latest failed")
		assert.Contains(t, userr.Message(err), "no space left on device")
	})
	t.Run("import fails", func(t *testing.T) {
		le := newLoadEnv(t, "docker", "op:latest", "a")
		le.nodes[0].ImportErr = errors.New("ctr: content digest not found")
		_, err := image.Load(ctx, image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "op:latest"})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "cannot load op:latest into node a")
		assert.Contains(t, userr.Message(err), "crictl images")
	})
	t.Run("node keeps another ID", func(t *testing.T) {
		le := newLoadEnv(t, "docker", "op:latest", "a")
		le.nodes[0].ImportedID = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
		_, err := image.Load(ctx, image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "op:latest"})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "node a has op:latest with ID sha256:000000000000 after loading, expected")
		assert.Contains(t, userr.Message(err), "crictl rmi")
	})
}

func TestReadArchiveDockerAndOCILayouts(t *testing.T) {
	img := enginetest.Image{Ref: "op:latest", Config: []byte(`{"a":1}`), Files: map[string]string{"manager": "ELF"}}
	raw, err := enginetest.DockerArchive(img)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "a.tar")
	require.NoError(t, os.WriteFile(p, raw, 0o644))
	a, err := image.ReadArchive(p)
	require.NoError(t, err)
	e, ok := a.Find("docker.io/library/op:latest")
	require.True(t, ok)
	assert.Equal(t, img.ID(), e.ID)
	_, ok = a.Find("localhost/op:latest")
	assert.False(t, ok)

	require.NoError(t, os.WriteFile(p, []byte("not a tar"), 0o644))
	_, err = image.ReadArchive(p)
	assert.Error(t, err)
}

func TestBuildFastTakesGOARCHFromTheEngine(t *testing.T) {
	for _, tt := range []struct {
		name     string
		facts    bool
		arch     string
		wantArch string
	}{
		{"arm engine under an amd64 Go (Rosetta)", true, "arm64", "arm64"},
		{"amd64 engine", true, "amd64", "amd64"},
		{"engine says nothing: the host's", false, "", runtime.GOARCH},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := project(t, "go.mod", "cmd/main.go")
			r := enginetest.NewRunner("go").Running("docker", "27.1.0")
			if tt.facts {
				r.Info("docker", engine.Facts{CgroupVersion: "2", Arch: tt.arch})
			}
			e := engine.New("docker", r)
			store := &enginetest.Store{}
			store.Attach(r, "docker")
			var goEnv []string
			r.On("go build", func(c engine.Cmd) error {
				goEnv = c.Env
				return os.WriteFile(c.Args[2], []byte("ELF"), 0o755)
			})
			r.On("docker build", func(c engine.Cmd) error {
				store.Put(enginetest.Image{Ref: c.Args[2], Config: []byte("{}")})
				return nil
			})
			_, err := image.Build(context.Background(), image.BuildOptions{Engine: e, Dir: dir, Tag: "op:dev", Mode: image.ModeFast})
			require.NoError(t, err)
			assert.Contains(t, goEnv, "GOARCH="+tt.wantArch)
		})
	}
}

// TestLoadContainerdImageStore: with Docker's containerd image store the
// engine's ID is the index digest and the node reports the config digest,
// so they never match; labctl remembers which config digest an engine ID
// saved to, and an unchanged image is then recognised without a save.
func TestLoadContainerdImageStore(t *testing.T) {
	le := newLoadEnv(t, "docker", "op:latest", "a")
	le.store.ContainerdStore = true
	cache := filepath.Join(t.TempDir(), "image-ids.json")
	img, _ := le.store.Get("op:latest")
	opts := image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "op:latest", IDCache: cache}

	res, err := image.Load(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, img.ID(), res.ID, "the config digest: what the node reports")
	assert.Equal(t, []string{"a"}, res.LoadedInto)
	assert.Equal(t, 1, le.r.Called("docker save"))

	res, err = image.Load(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Skipped)
	assert.Equal(t, img.ID(), res.ID)
	assert.Equal(t, 1, le.r.Called("docker save"), "unchanged image: not saved again")
	assert.Equal(t, 1, le.nodes[0].Imports())

	// A rebuild: new index digest, new config digest; loaded again.
	le.store.Put(enginetest.Image{Ref: "op:latest", Config: []byte(`{"rebuilt":true}`), Files: map[string]string{"manager": "ELF2"}})
	res, err = image.Load(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.LoadedInto)
	assert.Equal(t, 2, le.r.Called("docker save"))

	// Without the cache it still works, at the cost of a save.
	opts.IDCache = ""
	res, err = image.Load(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Skipped)
	assert.Equal(t, 3, le.r.Called("docker save"))
	assert.Equal(t, 2, le.nodes[0].Imports())
}

// TestLoadStreamsTheArchive: `docker save` writes to labctl's pipe, never
// to a path in the engine's (maybe private, with snap) /tmp.
func TestLoadStreamsTheArchive(t *testing.T) {
	le := newLoadEnv(t, "docker", "op:latest", "a")
	_, err := image.Load(context.Background(), image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "op:latest"})
	require.NoError(t, err)
	for _, c := range le.r.Calls() {
		if strings.HasPrefix(c, "docker save") {
			assert.Equal(t, "docker save op:latest", c)
		}
	}
}

// TestLoadRetriesOnlyTheEnginesPlatform: an archive from Docker's
// containerd image store can list blobs it does not hold; kind's
// `ctr import --all-platforms` fails on them, and labctl imports only the
// engine's platform instead.
func TestLoadRetriesOnlyTheEnginesPlatform(t *testing.T) {
	le := newLoadEnv(t, "docker", "op:latest", "a")
	le.r.Running("docker", "27.1.0").Info("docker", engine.Facts{CgroupVersion: "2", Arch: "arm64", ContainerdStore: true})
	le.nodes[0].AllPlatformsErr = errors.New("ctr: content digest sha256:4f3a: not found")
	res, err := image.Load(context.Background(), image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "op:latest"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.LoadedInto)
	var imports []string
	for _, c := range le.nodes[0].Calls() {
		if strings.Contains(c, " import ") {
			imports = append(imports, c)
		}
	}
	require.Len(t, imports, 2)
	assert.Contains(t, imports[0], "--all-platforms")
	assert.Equal(t, "ctr --namespace=k8s.io images import --digests --platform=linux/arm64 --snapshotter=overlayfs -", imports[1])

	// Other import failures are not retried.
	le = newLoadEnv(t, "docker", "op:latest", "a")
	le.nodes[0].ImportErr = errors.New("ctr: no space left on device")
	_, err = image.Load(context.Background(), image.LoadOptions{Engine: le.e, Nodes: le.kindNodes(), Ref: "op:latest"})
	require.Error(t, err)
	assert.Equal(t, 1, le.nodes[0].Imports())
}
