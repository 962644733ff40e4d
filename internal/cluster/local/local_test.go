//go:build linux

package local_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/testcluster"
	"github.com/labctl/labctl/internal/userr"
)

var env *testcluster.Cluster

func TestMain(m *testing.M) { testcluster.Main(m, &env) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestStatefulSetBecomesReadyWithBoundVolumes(t *testing.T) {
	ns := env.Namespace(t)
	sts := webStatefulSet(ns, 3)
	require.NoError(t, env.Client.Create(ctx(t), sts))
	obj, err := kube.WaitFor(ctx(t), env.Config, appsv1.SchemeGroupVersion.WithResource("statefulsets"), ns, "web", time.Minute,
		func(u *unstructured.Unstructured) (bool, error) {
			n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			return n == 3, nil
		})
	require.NoError(t, err, "last seen: %v", obj)

	var pvcs corev1.PersistentVolumeClaimList
	require.NoError(t, env.Client.List(ctx(t), &pvcs, &client.ListOptions{Namespace: ns}))
	require.Len(t, pvcs.Items, 3)
	for _, pvc := range pvcs.Items {
		assert.Equal(t, corev1.ClaimBound, pvc.Status.Phase, pvc.Name)
		assert.Equal(t, "standard", ptr.Deref(pvc.Spec.StorageClassName, ""), "default StorageClass fills it in")
	}
}

// webStatefulSet is a StatefulSet of replicas pods, each with a 1Gi claim
// (data-web-N) from the default StorageClass, as the Database operator makes.
func webStatefulSet(ns string, replicas int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": "web"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "postgres:14", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d"}}}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

// TestClaimIsBoundBeforeAPodUsesIt watches every state a claim and a pod
// pass through while a StatefulSet comes up: a claim never names its volume
// before it is Bound, and no pod is placed on the node before its claim is
// Bound (compared by resourceVersion, the store's single order), as on a
// real cluster. The end state alone cannot show this: the window is short.
func TestClaimIsBoundBeforeAPodUsesIt(t *testing.T) {
	ns := env.Namespace(t)
	c := ctx(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	claims, err := cs.CoreV1().PersistentVolumeClaims(ns).Watch(c, metav1.ListOptions{})
	require.NoError(t, err)
	defer claims.Stop()
	pods, err := cs.CoreV1().Pods(ns).Watch(c, metav1.ListOptions{})
	require.NoError(t, err)
	defer pods.Stop()
	require.NoError(t, env.Client.Create(c, webStatefulSet(ns, 3)))

	boundAt := map[string]int64{}  // claim -> resourceVersion of its first Bound state
	placedAt := map[string]int64{} // pod -> resourceVersion of its first state with a node
	rv := func(o metav1.Object) int64 {
		n, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
		require.NoError(t, err)
		return n
	}
	timeout := time.After(time.Minute)
	for len(boundAt) < 3 || len(placedAt) < 3 {
		select {
		case ev := <-claims.ResultChan():
			pvc, ok := ev.Object.(*corev1.PersistentVolumeClaim)
			require.True(t, ok, "claim watch: %v", ev.Object)
			bound := pvc.Status.Phase == corev1.ClaimBound
			require.False(t, pvc.Spec.VolumeName != "" && !bound,
				"claim %s names volume %s while %s (resourceVersion %s): the scheduler would place its pod ahead of the Bound phase",
				pvc.Name, pvc.Spec.VolumeName, pvc.Status.Phase, pvc.ResourceVersion)
			if _, seen := boundAt[pvc.Name]; bound && !seen {
				boundAt[pvc.Name] = rv(pvc)
			}
		case ev := <-pods.ResultChan():
			pod, ok := ev.Object.(*corev1.Pod)
			require.True(t, ok, "pod watch: %v", ev.Object)
			if _, seen := placedAt[pod.Name]; pod.Spec.NodeName != "" && !seen {
				placedAt[pod.Name] = rv(pod)
			}
		case <-timeout:
			require.FailNow(t, "the StatefulSet did not come up in a minute", "claims Bound: %v; pods placed: %v", boundAt, placedAt)
		}
	}
	for pod, placed := range placedAt {
		claim := "data-" + pod
		require.Contains(t, boundAt, claim)
		assert.Greater(t, placed, boundAt[claim], "pod %s was placed (resourceVersion %d) before its claim %s was Bound (%d)", pod, placed, claim, boundAt[claim])
	}
}

func TestJobCompletes(t *testing.T) {
	ns := env.Namespace(t)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once", Namespace: ns},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
			}},
		},
	}
	require.NoError(t, env.Client.Create(ctx(t), job))
	_, err := kube.WaitFor(ctx(t), env.Config, batchv1.SchemeGroupVersion.WithResource("jobs"), ns, "once", time.Minute, kube.StatusCondition("Complete", "True"))
	require.NoError(t, err)
}

func TestOwnedObjectIsGarbageCollected(t *testing.T) {
	ns := env.Namespace(t)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns}}
	require.NoError(t, env.Client.Create(ctx(t), owner))
	dep := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dep", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true),
	}}}}
	require.NoError(t, env.Client.Create(ctx(t), dep))
	require.NoError(t, env.Client.Delete(ctx(t), owner))
	_, err := kube.WaitFor(ctx(t), env.Config, corev1.SchemeGroupVersion.WithResource("secrets"), ns, "dep", 30*time.Second, kube.Gone)
	require.NoError(t, err)
}

func TestUpOnRunningClusterReusesIt(t *testing.T) {
	s, _, _ := iostreams.Test(false)
	c, err := env.Provider.Up(ctx(t), cluster.UpOptions{Name: env.Name, Streams: s, SkipKubeconfigMerge: true})
	require.NoError(t, err)
	assert.True(t, c.Reused)
	assert.Equal(t, env.Config.Host, c.Config.Host)
}

func TestStatusShowsEveryComponentHealthy(t *testing.T) {
	st, err := env.Provider.Status(ctx(t), env.Name)
	require.NoError(t, err)
	assert.True(t, st.Running)
	names := map[string]bool{}
	for _, c := range st.Components {
		names[c.Name] = true
		if c.Detail != "operator" {
			assert.True(t, c.Healthy, "%s: %s", c.Name, c.Detail)
			assert.NotZero(t, c.RSSBytes, c.Name)
			assert.NotZero(t, c.PSSBytes, c.Name)
		}
	}
	for _, want := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		assert.True(t, names[want], want)
	}
}

func TestAuditLogRecordsVerbsAndCodes(t *testing.T) {
	ns := env.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited", Namespace: ns}}
	require.NoError(t, env.Client.Create(ctx(t), cm))
	// The log is written in batches; follow it until the create shows up.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := env.Env.AuditLog(ctx(t))
		require.NoError(t, err)
		raw, _ := readAll(f)
		if strings.Contains(raw, `"name":"audited"`) {
			assert.Contains(t, raw, `"verb":"create"`)
			assert.Contains(t, raw, `"code":201`)
			return
		}
		require.True(t, time.Now().Before(deadline), "create of configmap/audited never reached the audit log")
		waitForWrite(t, filepath.Join(env.Env.StateDir, "logs", "audit.log"))
	}
}

// --- faults, each on a cluster of its own ---

func TestComponentDyingDuringUpIsReportedWithItsLog(t *testing.T) {
	p, clean, err := testcluster.NewProvider()
	require.NoError(t, err)
	defer clean()
	p.ExtraArgs = map[string][]string{"kube-apiserver": {"--no-such-flag=1"}}
	s, _, errOut := iostreams.Test(false)
	s.Verbose = true // the log tail is shown with -v
	_, err = p.Up(ctx(t), cluster.UpOptions{Name: "dies", Streams: s, SkipKubeconfigMerge: true})
	require.Error(t, err)
	msg := userr.Message(err)
	assert.Contains(t, msg, "kube-apiserver exited during start-up")
	assert.Contains(t, msg, "with -v to see the end of its log", "its log is removed with the failed cluster")
	assert.NotContains(t, msg, "\n")
	assert.Contains(t, errOut.String(), "no-such-flag", "the log tail is shown")
	procs, err := proc.Find(p.Dir("dies"))
	require.NoError(t, err)
	assert.Empty(t, procs, "a failed up leaves no process running")
	_, err = os.Stat(p.Dir("dies"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a failed new cluster leaves no state")
	_, err = os.Stat(p.Dir("dies") + ".lock")
	assert.ErrorIs(t, err, os.ErrNotExist, "nor its lock")
}

// A disk that fills up under etcd itself (past the up-front check): etcd
// cannot preallocate its WAL, and Up says so in one line with the
// environment's exit code, and leaves nothing behind.
func TestDiskFullInsideEtcdIsOneLineExit4(t *testing.T) {
	p, clean, err := testcluster.NewProvider()
	require.NoError(t, err)
	defer clean()
	small := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.MkdirAll(small, 0o755))
	// Room for the keys, the configs and the logs, not for etcd's 64 MiB WAL.
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=24m"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v); needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(small, syscall.MNT_DETACH) })
	p.StateRoot = small
	p.MinFree = -1 // let etcd meet the full disk itself

	s, _, _ := iostreams.Test(false)
	_, err = p.Up(ctx(t), cluster.UpOptions{Name: "full", Streams: s, SkipKubeconfigMerge: true})
	require.Error(t, err)
	assert.Equal(t, userr.ExitEnvironment, userr.Code(err))
	msg := userr.Message(err)
	assert.Regexp(t, `^the disk of .*/full is full: etcd stopped with "no space left on device"; a local cluster needs about 300 MiB free: free some space`, msg)
	assert.NotContains(t, msg, "\n")
	procs, err := proc.Find(p.Dir("full"))
	require.NoError(t, err)
	assert.Empty(t, procs, "a failed up leaves no process running")
	_, err = os.Stat(p.Dir("full"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a failed new cluster leaves no state")
}

func TestPortCollisionIsRetriedThenReported(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	p, clean, err := testcluster.NewProvider()
	require.NoError(t, err)
	defer clean()
	p.PickPort = func() (int, error) { return busyPort, nil } // always the taken one
	s, _, _ := iostreams.Test(false)
	_, err = p.Up(ctx(t), cluster.UpOptions{Name: "busy", Streams: s, SkipKubeconfigMerge: true})
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), "is in use by another program")
	assert.NotContains(t, userr.Message(err), "\n")
	_, err = os.Stat(p.Dir("busy"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a failed new cluster leaves no state")
}

func TestInvalidNameIsAUsageError(t *testing.T) {
	p, clean, err := testcluster.NewProvider()
	require.NoError(t, err)
	defer clean()
	_, err = p.Up(ctx(t), cluster.UpOptions{Name: "Bad_Name!"})
	require.Error(t, err)
	assert.Equal(t, userr.ExitUsage, userr.Code(err))
	assert.Contains(t, userr.Message(err), "invalid cluster name")
}

func TestDownOnMissingCluster(t *testing.T) {
	p, clean, err := testcluster.NewProvider()
	require.NoError(t, err)
	defer clean()
	err = p.Down(ctx(t), "nothing-here")
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), `there is no local cluster named "nothing-here"`)
}

func TestCorruptStateIsReportedAndDownCleansUp(t *testing.T) {
	p, clean, err := testcluster.NewProvider()
	require.NoError(t, err)
	defer clean()
	dir := p.Dir("corrupt")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "state.json"), []byte("{not json"), 0o644))
	_, err = p.Up(ctx(t), cluster.UpOptions{Name: "corrupt", SkipKubeconfigMerge: true})
	require.Error(t, err)
	assert.Contains(t, userr.Message(err), "unreadable")
	assert.Contains(t, userr.Message(err), "labctl down --name corrupt")
	require.NoError(t, p.Down(ctx(t), "corrupt"))
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err))
}

// A crash (every process killed, as after a reboot) is detected by the next
// up, which restarts the cluster with its data; down afterwards leaves no
// process and no listening port.
func TestStaleClusterIsRecoveredAndDownLeavesNothing(t *testing.T) {
	p, clean, err := testcluster.NewProvider()
	require.NoError(t, err)
	defer clean()
	kc := filepath.Join(t.TempDir(), "config")
	writeForeignKubeconfig(t, kc)
	s, _, errOut := iostreams.Test(false)
	c, err := p.Up(ctx(t), cluster.UpOptions{Name: "stale", Streams: s, KubeconfigPath: kc})
	require.NoError(t, err)
	cl, err := kube.NewClient(c.Config)
	require.NoError(t, err)
	require.NoError(t, cl.Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default"}}))

	procs, err := proc.Find(p.Dir("stale"))
	require.NoError(t, err)
	require.Len(t, procs, 5)
	for _, pr := range procs {
		require.NoError(t, syscall.Kill(pr.PID, syscall.SIGKILL))
	}
	for _, pr := range procs {
		require.NoError(t, proc.Stop(ctx(t), pr.PID, time.Second))
	}

	c2, err := p.Up(ctx(t), cluster.UpOptions{Name: "stale", Streams: s, KubeconfigPath: kc})
	require.NoError(t, err, errOut.String())
	assert.False(t, c2.Reused)
	assert.Contains(t, errOut.String(), "restarting it with its data")
	cl2, err := kube.NewClient(c2.Config)
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, cl2.Get(ctx(t), client.ObjectKey{Namespace: "default", Name: "survivor"}, &cm))

	st, err := p.Status(ctx(t), "stale")
	require.NoError(t, err)
	var ports []string
	for _, comp := range st.Components {
		if comp.Address != "" {
			ports = append(ports, comp.Address)
		}
	}
	// A user's `tail -f` of a log names the state directory too: down
	// stops only the processes it recorded.
	tail := exec.Command("tail", "-f", filepath.Join(p.Dir("stale"), "logs", "etcd.log"))
	require.NoError(t, tail.Start())
	require.NoError(t, p.Down(ctx(t), "stale"))
	assert.True(t, proc.Alive(tail.Process.Pid), "down killed a process it did not start")
	_ = tail.Process.Kill()
	_ = tail.Wait()
	procs, err = proc.Find(p.Dir("stale"))
	require.NoError(t, err)
	assert.Empty(t, procs)
	for _, addr := range ports {
		l, err := net.Listen("tcp", addr)
		if assert.NoError(t, err, "%s still listening after down", addr) {
			l.Close()
		}
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	require.NoError(t, err)
	assert.NotContains(t, cfg.Contexts, "labctl-stale")
	assert.Contains(t, cfg.Contexts, "mine", "down keeps the user's other contexts")
}

// A kubeconfig that cannot be written fails `up` before it does anything,
// with what to do; a cluster already running is left as it was.
func TestUnwritableKubeconfigFailsFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	// a path below a regular file can never be written, even by root
	s, _, _ := iostreams.Test(false)
	_, err := env.Provider.Up(ctx(t), cluster.UpOptions{Name: env.Name, Streams: s, KubeconfigPath: filepath.Join(file, "config")})
	require.Error(t, err)
	msg := userr.Message(err)
	assert.Contains(t, msg, "cannot write kubeconfig "+filepath.Join(file, "config"))
	assert.Contains(t, msg, "set KUBECONFIG to a writable file")
	c, err := env.Provider.Get(ctx(t), env.Name)
	require.NoError(t, err, "the running cluster is untouched")
	assert.Equal(t, env.Name, c.Name)
}
