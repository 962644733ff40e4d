package nodeimage

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/engine/enginetest"
	"github.com/labctl/labctl/internal/userr"
)

// kubeadmList is what kubeadm v1.37.2 prints for `config images list`.
var kubeadmList = []string{
	"registry.k8s.io/kube-apiserver:v1.37.2",
	"registry.k8s.io/kube-controller-manager:v1.37.2",
	"registry.k8s.io/kube-scheduler:v1.37.2",
	"registry.k8s.io/kube-proxy:v1.37.2",
	"registry.k8s.io/coredns/coredns:v1.14.6",
	"registry.k8s.io/pause:3.10.2",
	"registry.k8s.io/etcd:3.7.0-0",
}

func TestComponentsServeKubeadmsNamesWithKindsPause(t *testing.T) {
	got := map[string]string{}
	for _, c := range Components(kubeadmList) {
		got[c.Name] = c.Binary + "/" + c.Command
	}
	want := map[string]string{
		"registry.k8s.io/kube-apiserver:v1.37.2":          "controlplane/kube-apiserver",
		"registry.k8s.io/kube-controller-manager:v1.37.2": "controlplane/kube-controller-manager",
		"registry.k8s.io/kube-scheduler:v1.37.2":          "controlplane/kube-scheduler",
		"registry.k8s.io/kube-proxy:v1.37.2":              "kubenode/kube-proxy",
		"registry.k8s.io/etcd:3.7.0-0":                    "controlplane/etcd",
		"registry.k8s.io/coredns/coredns:v1.14.6":         "coredns/coredns",
		SandboxImage: "pause/pause",
	}
	if len(got) != len(want) {
		t.Fatalf("components = %v, want %v", got, want)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s served by %q, want %q", name, got[name], w)
		}
	}
}

func TestComponentDockerfileRunsTheCommandByItsPodName(t *testing.T) {
	c := Component{Name: "registry.k8s.io/etcd:3.7.0-0", Binary: "controlplane", Command: "etcd"}
	df := c.Dockerfile("labctl/kind-base:x")
	for _, want := range []string{"FROM labctl/kind-base:x\n", "COPY controlplane /usr/local/bin/controlplane\n",
		"RUN ln -s controlplane /usr/local/bin/etcd\n", `ENTRYPOINT ["/usr/local/bin/etcd"]`, "ENV PATH="} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q:\n%s", want, df)
		}
	}
	pause := Component{Name: SandboxImage, Binary: "pause", Command: "pause"}.Dockerfile("b")
	if strings.Contains(pause, "ln -s") {
		t.Errorf("pause needs no link:\n%s", pause)
	}
}

func TestCRIBaseSpecAddsKindsHookAndDropsRlimits(t *testing.T) {
	in := `{"ociVersion":"1.2.0","process":{"args":["sh"],"rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}]},"hooks":{"createContainer":[{"path":"/other"}]}}`
	out, err := CRIBaseSpec([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Process map[string]any `json:"process"`
		Hooks   struct {
			CreateContainer []struct{ Path string } `json:"createContainer"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Process["rlimits"]; ok {
		t.Errorf("rlimits kept: %s", out)
	}
	if n := len(s.Hooks.CreateContainer); n != 2 || s.Hooks.CreateContainer[1].Path != "/kind/bin/mount-product-files.sh" {
		t.Errorf("createContainer hooks = %+v", s.Hooks.CreateContainer)
	}
	if _, err := CRIBaseSpec([]byte("not json")); err == nil {
		t.Error("a broken spec was accepted")
	}
}

func TestReferenceChangesWithEveryVersion(t *testing.T) {
	base := DefaultVersions()
	if Reference(base) != Reference(DefaultVersions()) {
		t.Fatal("the reference is not stable")
	}
	if !regexp.MustCompile(`^labctl/kind-node:v1\.\d+\.\d+-[0-9a-f]{12}$`).MatchString(Reference(base)) {
		t.Errorf("reference %q", Reference(base))
	}
	seen := map[string]string{Reference(base): "default"}
	for name, change := range map[string]func(*Versions){
		"kubernetes": func(v *Versions) { v.Kubernetes = "v1.37.3" },
		"kind":       func(v *Versions) { v.Kind = "v0.33.1" },
		"containerd": func(v *Versions) { v.Containerd = "v2.4.3" },
		"crictl":     func(v *Versions) { v.CriTools = "v1.37.1" },
		"debian":     func(v *Versions) { v.Debian = "trixie" },
		"coredns":    func(v *Versions) { v.CoreDNS = "v1.14.7" },
	} {
		v := base
		change(&v)
		ref := Reference(v)
		if other, dup := seen[ref]; dup {
			t.Errorf("changing %s gives the same reference as %s: %s", name, other, ref)
		}
		seen[ref] = name
	}
	k8s := base
	k8s.Kubernetes = "v1.37.3"
	if BaseReference(k8s) != BaseReference(base) {
		t.Error("a new Kubernetes version would debootstrap again")
	}
	debian := base
	debian.Debian = "trixie"
	if BaseReference(debian) == BaseReference(base) {
		t.Error("another Debian suite reuses the old file system")
	}
}

func TestBuildReturnsTheCachedImageAtOnce(t *testing.T) {
	r := enginetest.NewRunner("docker").OnOutput("docker image inspect --format {{.Id}} "+Reference(DefaultVersions()), "sha256:abc\n")
	var lines []string
	res, err := Build(context.Background(), Options{Engine: engine.New("docker", r), CacheDir: t.TempDir(),
		Progress: func(f string, a ...any) { lines = append(lines, f) }})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cached || res.Ref != Reference(DefaultVersions()) {
		t.Errorf("result = %+v", res)
	}
	if calls := r.Calls(); len(calls) != 1 {
		t.Errorf("a cached image ran %v", calls)
	}
	if len(lines) != 1 {
		t.Errorf("progress = %v", lines)
	}
}

func TestBuildWithoutDebootstrapSaysHowToGetIt(t *testing.T) {
	r := enginetest.NewRunner("docker").OnFail("docker image inspect", 1, "Error: No such image")
	_, err := Build(context.Background(), Options{Engine: engine.New("docker", r), CacheDir: t.TempDir()})
	var u *userr.Error
	if !errors.As(err, &u) || userr.Code(err) != userr.ExitEnvironment || !strings.Contains(u.Next, "apt-get install debootstrap") {
		t.Fatalf("err = %v (%T)", err, err)
	}
	if r.Called("debootstrap") != 0 || r.Called("docker build") != 0 {
		t.Errorf("it went on: %v", r.Calls())
	}
}

func TestBuildWithoutEngineIsAnEnvironmentError(t *testing.T) {
	_, err := Build(context.Background(), Options{CacheDir: t.TempDir()})
	if userr.Code(err) != userr.ExitEnvironment {
		t.Fatalf("err = %v", err)
	}
}

// kindModuleDir is the pinned kind module in Go's module cache.
func kindModuleDir(t *testing.T) string {
	out, err := exec.Command("go", "list", "-m", "-json", "sigs.k8s.io/kind").Output()
	if err != nil {
		t.Skipf("go list -m sigs.k8s.io/kind: %v", err)
	}
	var m struct{ Version, Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Skipf("kind's module is not in the module cache (%v)", err)
	}
	if m.Version != DefaultVersions().Kind {
		t.Errorf("labctl links kind %s but the node image carries kind %s's files", m.Version, DefaultVersions().Kind)
	}
	return m.Dir
}

// The names the node's images carry are the ones kind's own files ask for.
func TestSandboxImageIsKindsContainerdSandboxImage(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join(kindModuleDir(t), "images/base/files/etc/containerd/config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), `sandbox_image = "`+SandboxImage+`"`) {
		t.Errorf("kind's containerd config names another sandbox image than %s:\n%s", SandboxImage, cfg)
	}
}

// Every file the node Dockerfile enables or runs comes with kind's base files.
func TestKindBaseFilesHoldWhatTheNodeDockerfileUses(t *testing.T) {
	files := filepath.Join(kindModuleDir(t), "images/base/files")
	for _, f := range []string{"usr/local/bin/entrypoint", "etc/systemd/system/kubelet.service", "etc/systemd/system/containerd.service",
		"etc/systemd/system/undo-mount-hacks.service", "etc/containerd/config.toml", "kind/bin/mount-product-files.sh"} {
		if _, err := os.Stat(filepath.Join(files, f)); err != nil {
			t.Errorf("kind %s has no %s: %v", DefaultVersions().Kind, f, err)
		}
	}
}

// CoreDNS is built at the version kubeadm deploys (and so names its image).
func TestCoreDNSIsTheVersionKubeadmDeploys(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skip(err)
	}
	v := DefaultVersions()
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "k8s.io/kubernetes@"+v.Kubernetes, "cmd/kubeadm/app/constants/constants.go"))
	if err != nil {
		t.Skipf("k8s.io/kubernetes %s is not in the module cache: %v", v.Kubernetes, err)
	}
	if !strings.Contains(string(src), `CoreDNSVersion = "`+v.CoreDNS+`"`) {
		t.Errorf("kubeadm %s deploys another CoreDNS than %s", v.Kubernetes, v.CoreDNS)
	}
}

// The build container goes before its stage image: Docker refuses to remove
// an image a container uses ("conflict: unable to remove repository
// reference"), which failed the first real build at its last step. The
// component images go too: they live on inside the node.
func TestPreloadRemovesTheBuildContainerBeforeTheStageImage(t *testing.T) {
	r := enginetest.NewRunner("docker").
		On("docker", func(engine.Cmd) error { return nil }).
		On("docker rmi", func(c engine.Cmd) error { return nil })
	var order []string
	r.Trace = func(line string) {
		if strings.HasPrefix(line, "docker rm ") || strings.HasPrefix(line, "docker rmi ") {
			order = append(order, strings.Fields(line)[1])
		}
	}
	b := &build{o: Options{Engine: engine.New("docker", r), Runner: r, Tag: "labctl/kind-node:t", Versions: DefaultVersions()},
		images: []Component{{Name: "registry.k8s.io/pause:3.10", Binary: "pause", Command: "pause"}}}
	if err := b.preload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.Called("docker rmi labctl/kind-node:t-stage registry.k8s.io/pause:3.10") != 1 {
		t.Errorf("the stage and component images are left behind: %v", r.Calls())
	}
	// rm before the run (a leftover), rm after the commit, then rmi; the
	// deferred rm finds nothing.
	want := []string{"rm", "rm", "rmi", "rm"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("removals %v, want %v", order, want)
	}
}
