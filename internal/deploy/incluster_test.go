package deploy_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/deploy"
	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/engine/enginetest"
	"github.com/labctl/labctl/internal/image"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/userr"
)

// inClusterProject copies the reference operator's config/ into a temp
// project with its own namespace and name prefix, so in-cluster deploys do
// not collide with the local-process tests sharing this cluster.
func inClusterProject(t *testing.T, prefix string) *deploy.Project {
	t.Helper()
	ref, err := deploy.ResolveProject("")
	require.NoError(t, err)
	dir := t.TempDir()
	src := filepath.Join(ref.Dir, "config")
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ref.Dir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == filepath.Join("config", "default", "kustomization.yaml") {
			s := strings.Replace(string(raw), "namespace: postgres-operator-system", "namespace: "+prefix+"-system", 1)
			s = strings.Replace(s, "namePrefix: postgres-operator-", "namePrefix: "+prefix+"-", 1)
			raw = []byte(s)
		}
		return os.WriteFile(filepath.Join(dir, rel), raw, 0o644)
	}))
	p := &deploy.Project{Dir: dir, Name: prefix}
	t.Cleanup(func() { cleanupProject(p) })
	return p
}

// cleanupProject deletes what the project applied, except the CRDs the
// other tests share.
func cleanupProject(p *deploy.Project) {
	objs, err := p.Render()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		_ = env.Client.Delete(ctx, o)
	}
}

func clientset(t *testing.T) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	return cs
}

func getDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := clientset(t).AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

func TestInClusterDeployAndRolloutRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	ctx := context.Background()
	p := inClusterProject(t, "incluster")
	ns, name := "incluster-system", "incluster-controller-manager"
	s, _, errOut := iostreams.Test(false)
	deployWith := func(img, id string) *operator.Operator {
		t.Helper()
		op, err := deploy.InCluster(ctx, env.Config, p, deploy.InClusterOptions{Streams: s, Image: img, ImageID: id, Timeout: 2 * time.Minute})
		require.NoError(t, err, errOut.String())
		return op
	}

	// First deploy: image and pull policy set, Available.
	op := deployWith("localhost/postgres-operator:latest", "sha256:aaaa")
	assert.Equal(t, ns, op.Namespace)
	assert.Equal(t, name, op.ServiceAccount)
	assert.Equal(t, "system:serviceaccount:"+ns+":"+name, op.Identity)
	assert.Equal(t, p.Name, op.ProjectName)
	assert.Equal(t, p.Dir, op.ProjectDir)
	d := getDeployment(t, ns, name)
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "manager", c.Name)
	assert.Equal(t, "localhost/postgres-operator:latest", c.Image)
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
	assert.Equal(t, "sha256:aaaa", d.Annotations[deploy.ImageIDAnnotation])
	assert.Empty(t, d.Spec.Template.Annotations[deploy.RestartedAtAnnotation])
	assert.True(t, available(d), "%+v", d.Status)
	for _, mf := range d.ManagedFields {
		if mf.Operation == metav1.ManagedFieldsOperationApply {
			assert.Equal(t, "labctl", mf.Manager)
		}
	}
	n, err := op.Restarts(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = op.Logs(ctx)
	if err != nil {
		// kwok runs no kubelet to serve logs; the pod must still be found.
		assert.NotContains(t, err.Error(), "no manager pod")
	}
	assert.Equal(t, "1", revision(d))

	// Same image ID again: nothing rolls.
	deployWith("localhost/postgres-operator:latest", "sha256:aaaa")
	d = getDeployment(t, ns, name)
	assert.Equal(t, "1", revision(d), "no new rollout")
	assert.Empty(t, d.Spec.Template.Annotations[deploy.RestartedAtAnnotation])
	assert.NotContains(t, errOut.String(), "restarting the rollout")

	// Rebuilt image, same name: the rollout is restarted and waited for.
	deployWith("localhost/postgres-operator:latest", "sha256:bbbb")
	d = getDeployment(t, ns, name)
	restartedAt := d.Spec.Template.Annotations[deploy.RestartedAtAnnotation]
	assert.NotEmpty(t, restartedAt)
	assert.Equal(t, "2", revision(d), "one new rollout")
	assert.Equal(t, d.Generation, d.Status.ObservedGeneration)
	assert.Equal(t, int32(1), d.Status.UpdatedReplicas)
	assert.True(t, available(d))
	assert.Contains(t, errOut.String(), "New image bbbb: restarting the rollout of "+ns+"/"+name)
	for _, mf := range d.ManagedFields {
		if mf.Manager == "labctl-rollout" {
			assert.Equal(t, metav1.ManagedFieldsOperationUpdate, mf.Operation)
		}
	}

	// A later apply does not drop the restart annotation (it would roll
	// the pods again) ...
	deployWith("localhost/postgres-operator:latest", "sha256:bbbb")
	d = getDeployment(t, ns, name)
	assert.Equal(t, restartedAt, d.Spec.Template.Annotations[deploy.RestartedAtAnnotation])
	assert.Equal(t, "2", revision(d))

	// ... and a new image name rolls out by itself: no extra restart.
	errOut.Reset()
	deployWith("postgres-operator:v2", "sha256:cccc")
	d = getDeployment(t, ns, name)
	assert.Equal(t, "postgres-operator:v2", d.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, restartedAt, d.Spec.Template.Annotations[deploy.RestartedAtAnnotation])
	assert.Equal(t, "3", revision(d), "exactly one rollout for the new name")
	assert.NotContains(t, errOut.String(), "restarting the rollout")
}

// revision counts the Deployment's rollouts (new ReplicaSets); its
// generation also moves on annotation changes.
func revision(d *appsv1.Deployment) string { return d.Annotations["deployment.kubernetes.io/revision"] }

func available(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tinyProject is a project whose config/default is just a namespace and
// a manager Deployment with the given pod spec additions.
func tinyProject(t *testing.T, ns, podSpecExtra string) *deploy.Project {
	t.Helper()
	dir := t.TempDir()
	def := filepath.Join(dir, "config", "default")
	require.NoError(t, os.MkdirAll(def, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(def, "kustomization.yaml"), []byte("resources:\n- manager.yaml\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(def, "manager.yaml"), []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: controller-manager, namespace: %[1]s}
spec:
  selector: {matchLabels: {control-plane: controller-manager}}
  template:
    metadata: {labels: {control-plane: controller-manager}}
    spec:
%[2]s
      containers:
      - name: manager
        image: controller:latest
`, ns, podSpecExtra)), 0o644))
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return &deploy.Project{Dir: dir, Name: "tiny"}
}

func TestInClusterDiagnosesAStuckRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	ctx := context.Background()
	t.Run("unschedulable", func(t *testing.T) {
		p := tinyProject(t, "stuck-sched", "      nodeSelector: {no-such-label: x}")
		s, _, _ := iostreams.Test(false)
		_, err := deploy.InCluster(ctx, env.Config, p, deploy.InClusterOptions{Streams: s, Image: "op:latest", Timeout: 5 * time.Second})
		require.Error(t, err)
		msg := userr.Message(err)
		assert.NotContains(t, msg, "\n")
		assert.Contains(t, msg, "deployment stuck-sched/controller-manager did not become Available (")
		assert.Contains(t, msg, "0/1 available)")
		assert.Contains(t, msg, "is unschedulable")
		assert.Contains(t, msg, "no node can run the manager")
	})
	t.Run("image not on the node", func(t *testing.T) {
		// kwok pulls nothing: make the pod report what a kind node does
		// when the Deployment names an image nobody loaded.
		p := tinyProject(t, "stuck-pull", "      nodeSelector: {no-such-label: x}")
		cs := clientset(t)
		var wg sync.WaitGroup
		wg.Add(1)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		go func() {
			defer wg.Done()
			w, err := cs.CoreV1().Pods("stuck-pull").Watch(wctx, metav1.ListOptions{})
			if err != nil {
				return
			}
			defer w.Stop()
			for ev := range w.ResultChan() {
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "manager", Image: "postgres-operator:latest",
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull",
						Message: "failed to pull and unpack image \"docker.io/library/postgres-operator:latest\": pull access denied"}}}}
				if _, err := cs.CoreV1().Pods("stuck-pull").UpdateStatus(wctx, pod, metav1.UpdateOptions{}); err == nil {
					return
				}
			}
		}()
		s, _, _ := iostreams.Test(false)
		_, err := deploy.InCluster(ctx, env.Config, p, deploy.InClusterOptions{Streams: s, Image: "postgres-operator:latest", Timeout: 6 * time.Second})
		wg.Wait()
		require.Error(t, err)
		msg := userr.Message(err)
		assert.Contains(t, msg, "is ErrImagePull (failed to pull and unpack image")
		assert.Contains(t, msg, "the node does not have image postgres-operator:latest")
		assert.Contains(t, msg, "localhost/NAME")
		assert.Contains(t, msg, "IfNotPresent")
	})
}

func TestInClusterBadProjects(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	ctx := context.Background()
	t.Run("no manager Deployment", func(t *testing.T) {
		dir := t.TempDir()
		def := filepath.Join(dir, "config", "default")
		require.NoError(t, os.MkdirAll(def, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(def, "kustomization.yaml"), []byte("resources:\n- ns.yaml\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(def, "ns.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: nothing-here}\n"), 0o644))
		_, err := deploy.InCluster(ctx, env.Config, &deploy.Project{Dir: dir, Name: "x"}, deploy.InClusterOptions{Image: "op:latest"})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "config/default renders no Deployment with a container named manager")
		assert.Equal(t, userr.ExitUsage, userr.Code(err))
	})
	t.Run("project without config/default", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644))
		_, err := deploy.LoadProject(dir)
		require.Error(t, err)
		msg := userr.Message(err)
		assert.NotContains(t, msg, "\n")
		assert.Contains(t, msg, "config/default/kustomization.yaml is missing")
		assert.Contains(t, msg, "--project")
	})
	t.Run("existing cluster without an image", func(t *testing.T) {
		t.Setenv("LABCTL_IMAGE", "")
		_, err := deploy.ToExisting(ctx, env.Cluster, &deploy.Project{Dir: t.TempDir(), Name: "x"}, deploy.ExistingOptions{})
		require.Error(t, err)
		assert.Contains(t, userr.Message(err), "needs an image the cluster can pull")
		assert.Contains(t, userr.Message(err), "LABCTL_IMAGE")
	})
}

// fakeKind is kind's library whose one cluster is the local test cluster,
// with one fake node simulating containerd.
type fakeKind struct {
	name string
	node *enginetest.Node
}

func (f *fakeKind) Create(*v1alpha4.Cluster, string, time.Duration) error { return nil }
func (f *fakeKind) Delete(string, string) error                           { return nil }
func (f *fakeKind) List() ([]string, error)                               { return []string{f.name}, nil }
func (f *fakeKind) ListNodes(string) ([]nodes.Node, error)                { return []nodes.Node{f.node}, nil }
func (f *fakeKind) KubeConfig(string) (string, error)                     { return "", nil }

// TestToKind runs labctl's kind path with a faked engine and node against
// the real local API: build → save → load → confirm ID → deploy, then a
// rebuild with new content restarts the rollout and an unchanged rebuild
// loads nothing and restarts nothing.
func TestToKind(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	ctx := context.Background()
	p := inClusterProject(t, "tokind")
	require.NoError(t, os.WriteFile(filepath.Join(p.Dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644))
	node := enginetest.NewNode("course-control-plane")
	r := enginetest.NewRunner().Running("podman", "5.0.0")
	store := &enginetest.Store{IDWithoutPrefix: true}
	store.Attach(r, "podman")
	version := "1"
	r.On("podman build", func(c engine.Cmd) error {
		store.Put(enginetest.Image{Ref: "localhost/" + c.Args[2], Config: []byte(`{"v":"` + version + `"}`)})
		return nil
	})
	prov := &kind.Provider{Runner: r, Getenv: func(string) string { return "" }, StateRoot: t.TempDir(),
		NewAPI: func(*engine.Engine, kind.Progress) kind.API { return &fakeKind{name: "course", node: node} }}
	c := &cluster.Cluster{Name: "course", Provider: kind.ProviderName, Config: env.Config}
	s, _, errOut := iostreams.Test(false)
	ns, name := "tokind-system", "tokind-controller-manager"
	toKind := func() *operator.Operator {
		t.Helper()
		op, err := deploy.ToKind(ctx, c, p, deploy.KindOptions{Streams: s, Provider: prov, Tag: "postgres-operator:latest", Mode: image.ModeDockerfile, Timeout: 2 * time.Minute})
		require.NoError(t, err, errOut.String())
		return op
	}

	op := toKind()
	assert.Equal(t, ns, op.Namespace)
	d := getDeployment(t, ns, name)
	img, _ := store.Get("localhost/postgres-operator:latest")
	assert.Equal(t, "localhost/postgres-operator:latest", d.Spec.Template.Spec.Containers[0].Image, "the name the node has")
	assert.Equal(t, img.ID(), node.ImageID("localhost/postgres-operator:latest"))
	assert.Equal(t, img.ID(), d.Annotations[deploy.ImageIDAnnotation])
	assert.Equal(t, 1, node.Imports())
	assert.Equal(t, "1", revision(d))

	// Unchanged rebuild: nothing saved or loaded, nothing restarted.
	saves := r.Called("podman save")
	toKind()
	assert.Equal(t, saves, r.Called("podman save"))
	assert.Equal(t, 1, node.Imports())
	assert.Equal(t, "1", revision(getDeployment(t, ns, name)))

	// New content under the same tag: loaded again, rollout restarted.
	version = "2"
	toKind()
	assert.Equal(t, 2, node.Imports())
	d = getDeployment(t, ns, name)
	img, _ = store.Get("localhost/postgres-operator:latest")
	assert.Equal(t, img.ID(), d.Annotations[deploy.ImageIDAnnotation])
	assert.NotEmpty(t, d.Spec.Template.Annotations[deploy.RestartedAtAnnotation])
	assert.Equal(t, "2", revision(d))
	assert.True(t, available(d))

	// A failed build stops before anything is applied.
	r.OnFail("podman build", 1, "Error: building at STEP \"RUN go build\": exit status 1\n")
	_, err := deploy.ToKind(ctx, c, p, deploy.KindOptions{Streams: s, Provider: prov, Tag: "postgres-operator:latest"})
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), "`podman build` of postgres-operator:latest failed: Error: building at STEP")
	assert.Contains(t, errOut.String(), "last lines of the build log:")

	// An invalid image name is refused before building.
	_, err = deploy.ToKind(ctx, c, p, deploy.KindOptions{Streams: s, Provider: prov, Tag: "Postgres Operator"})
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), `invalid image name "Postgres Operator"`)
}

// A redeploy deletes what the deploy before applied and the project no
// longer has: the metrics-reader binding taken out of
// config/rbac/kustomization.yaml stops granting. The list of what was
// applied rides on the manager Deployment.
func TestInClusterRedeployDeletesWhatTheProjectNoLongerHas(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	ctx := context.Background()
	p := inClusterProject(t, "pruned")
	s, _, errOut := iostreams.Test(false)
	deployed := func() {
		t.Helper()
		_, err := deploy.InCluster(ctx, env.Config, p, deploy.InClusterOptions{Streams: s, Image: "localhost/postgres-operator:latest", Timeout: 2 * time.Minute})
		require.NoError(t, err, errOut.String())
	}
	deployed()
	crb := &rbacv1.ClusterRoleBinding{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "pruned-metrics-reader-rolebinding"}, crb))
	assert.Contains(t, getDeployment(t, "pruned-system", "pruned-controller-manager").Annotations[deploy.AppliedAnnotation], `"kind":"ClusterRoleBinding","name":"pruned-metrics-reader-rolebinding"`)

	kustomization := filepath.Join(p.Dir, "config", "rbac", "kustomization.yaml")
	raw, err := os.ReadFile(kustomization)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(kustomization, []byte(strings.Replace(string(raw), "- metrics_reader_role_binding.yaml\n", "", 1)), 0o644))
	deployed()
	err = env.Client.Get(ctx, client.ObjectKey{Name: "pruned-metrics-reader-rolebinding"}, crb)
	assert.True(t, apierrors.IsNotFound(err), "the binding taken out of config/ is deleted: %v", err)
	assert.Contains(t, errOut.String(), "Deleted ClusterRoleBinding pruned-metrics-reader-rolebinding: the project no longer has it.")
	assert.NotContains(t, errOut.String(), "Deleted CustomResourceDefinition")
}
