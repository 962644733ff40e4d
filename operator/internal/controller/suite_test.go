/*
Copyright 2026 The labctl authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	databasev1 "github.com/example/postgres-operator/api/v1"
	// +kubebuilder:scaffold:imports
)

// These tests run the controllers in a manager against a real kube-apiserver and
// etcd (envtest). There is no kube-controller-manager: the tests play its part
// by writing StatefulSet and Job status themselves.

const (
	// reactionTimeout bounds how long a watch-driven reaction may take: a
	// few reconciles, each well under a second, but on a machine whose two
	// cores are busy (labctl's own make test runs this suite beside other
	// packages) one reaction took 2.1 s. A controller that only polled (the
	// course's 10 s requeue) still misses it about half the time.
	reactionTimeout = 5 * time.Second
	pollInterval    = 50 * time.Millisecond
	// quietPeriod is how long a spec watches that nothing happens.
	quietPeriod = 500 * time.Millisecond

	// isolatedNamespace is left out of the suite manager's cache: no controller
	// of that manager sees, reconciles or overwrites what is in it. Specs that
	// need a state no controller would keep (a Backup status the Backup
	// controller would rewrite) put it there and run only the controller under
	// test, in a manager of their own (startIsolatedDatabaseManager).
	isolatedNamespace = "isolated"
)

var (
	ctx        context.Context
	cancel     context.CancelFunc
	testEnv    *envtest.Environment
	cfg        *rest.Config
	k8sClient  client.Client
	testScheme = runtime.NewScheme()
	// fakeClock is the Backup controller's clock: schedules are tested by
	// moving it, never by waiting for a cron time.
	fakeClock = clocktesting.NewFakeClock(time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC))
	// writes records the Database controller's writes to children.
	writes = &writeRecorder{}
	// running is the manager the specs currently talk to.
	running *testManager
)

func TestControllers(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: the controller tests need a directory with the " +
			"kube-apiserver and etcd binaries: run `make test`, which finds them (or has labctl build them), " +
			"or set KUBEBUILDER_ASSETS=/path/to/bin")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controller Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(pollInterval)
	SetDefaultConsistentlyDuration(time.Second)
	SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)

	ctx, cancel = context.WithCancel(context.TODO())

	utilruntime.Must(clientgoscheme.AddToScheme(testScheme))
	utilruntime.Must(databasev1.AddToScheme(testScheme))
	// +kubebuilder:scaffold:scheme

	By("bootstrapping test environment from KUBEBUILDER_ASSETS=" + os.Getenv("KUBEBUILDER_ASSETS"))
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	Expect(cfg).NotTo(BeNil())

	k8sClient, err = client.New(cfg, client.Options{Scheme: testScheme})
	Expect(err).NotTo(HaveOccurred())

	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: isolatedNamespace}})).To(Succeed())

	running = startManager()
})

var _ = AfterSuite(func() {
	By("tearing down the test environment")
	if running != nil {
		running.stop()
	}
	cancel()
	Expect(testEnv.Stop()).To(Succeed())
})

// testManager is one running controller manager and its reconcilers (backup is
// nil when the manager runs only the Database controller).
type testManager struct {
	database *DatabaseReconciler
	backup   *BackupReconciler
	cancel   context.CancelFunc
	done     chan struct{}
}

// startManager starts a manager the way cmd/main.go does, with the test's clock
// and a Database controller client that records its writes. Its cache covers
// every namespace but isolatedNamespace.
func startManager() *testManager {
	mgr := newTestManager(cache.Options{DefaultNamespaces: map[string]cache.Config{
		// A per-namespace entry next to AllNamespaces would not exclude that
		// namespace: it would get an informer of its own (the AllNamespaces
		// informer only gets "metadata.namespace!=<it>" so that nothing is
		// cached twice). Exclusion is this field selector on the AllNamespaces
		// entry, which the cache ANDs with those it adds.
		cache.AllNamespaces: {FieldSelector: fields.OneTermNotEqualSelector("metadata.namespace", isolatedNamespace)},
	}})
	m := &testManager{
		database: &DatabaseReconciler{
			Client:    &recordingClient{Client: mgr.GetClient(), rec: writes},
			Scheme:    mgr.GetScheme(),
			Recorder:  mgr.GetEventRecorder("database-controller"),
			APIReader: mgr.GetAPIReader(),
		},
		backup: &BackupReconciler{
			Client:    mgr.GetClient(),
			Scheme:    mgr.GetScheme(),
			Recorder:  mgr.GetEventRecorder("backup-controller"),
			APIReader: mgr.GetAPIReader(),
			Clock:     fakeClock,
		},
	}
	Expect(m.database.SetupWithManager(mgr)).To(Succeed())
	Expect(m.backup.SetupWithManager(mgr)).To(Succeed())
	m.start(mgr)
	return m
}

// startIsolatedDatabaseManager starts a manager that runs only the Database
// controller and caches only isolatedNamespace, which the suite manager does
// not watch: there the specs write Backup statuses that no Backup controller
// rewrites, and watch the real Database controller react to them.
func startIsolatedDatabaseManager() *testManager {
	mgr := newTestManager(cache.Options{DefaultNamespaces: map[string]cache.Config{isolatedNamespace: {}}})
	m := &testManager{database: &DatabaseReconciler{
		Client:    mgr.GetClient(),
		Scheme:    mgr.GetScheme(),
		Recorder:  mgr.GetEventRecorder("database-controller"),
		APIReader: mgr.GetAPIReader(),
	}}
	Expect(m.database.SetupWithManager(mgr)).To(Succeed())
	m.start(mgr)
	return m
}

func newTestManager(cacheOptions cache.Options) ctrl.Manager {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testScheme,
		Cache:                  cacheOptions,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Several managers run in this process, one after another (restart
		// tests) and side by side (isolated specs).
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	return mgr
}

// start runs mgr until stop is called and waits for its cache to sync.
func (m *testManager) start(mgr ctrl.Manager) {
	m.done = make(chan struct{})
	var mctx context.Context
	mctx, m.cancel = context.WithCancel(ctx)
	go func() {
		defer GinkgoRecover()
		defer close(m.done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
}

// stop stops the manager and waits until it has returned.
func (m *testManager) stop() {
	m.cancel()
	Eventually(m.done).Should(BeClosed())
}

// writeRecorder keeps the Update and Patch calls a client made, per object.
type writeRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (w *writeRecorder) add(verb string, obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, fmt.Sprintf("%s %T %s/%s", verb, obj, obj.GetNamespace(), obj.GetName()))
}

// forObject returns the calls made on one object, e.g. "patch:application/merge-patch+json".
func (w *writeRecorder) forObject(obj client.Object, namespace, name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	suffix := fmt.Sprintf(" %T %s/%s", obj, namespace, name)
	var out []string
	for _, c := range w.calls {
		if len(c) > len(suffix) && c[len(c)-len(suffix):] == suffix {
			out = append(out, c[:len(c)-len(suffix)])
		}
	}
	return out
}

type recordingClient struct {
	client.Client
	rec *writeRecorder
}

func (c *recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.rec.add("update", obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.rec.add("patch:"+string(patch.Type()), obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// ---- helpers shared by the specs ----

func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

func newDatabase(namespace, name string, mutate ...func(*databasev1.Database)) *databasev1.Database {
	db := &databasev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: databasev1.DatabaseSpec{
			Image:        "postgres:14",
			Replicas:     ptr.To[int32](1),
			DatabaseName: "mydb",
			Username:     "admin",
			Storage:      databasev1.StorageSpec{Size: "1Gi"},
		},
	}
	for _, m := range mutate {
		m(db)
	}
	Expect(k8sClient.Create(ctx, db)).To(Succeed())
	return db
}

func newBackup(namespace, name, database string, mutate ...func(*databasev1.Backup)) *databasev1.Backup {
	backup := &databasev1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       databasev1.BackupSpec{DatabaseRef: corev1.LocalObjectReference{Name: database}},
	}
	for _, m := range mutate {
		m(backup)
	}
	Expect(k8sClient.Create(ctx, backup)).To(Succeed())
	return backup
}

func getDatabase(g Gomega, namespace, name string) *databasev1.Database {
	db := &databasev1.Database{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, db)).To(Succeed())
	return db
}

func getBackup(g Gomega, namespace, name string) *databasev1.Backup {
	backup := &databasev1.Backup{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, backup)).To(Succeed())
	return backup
}

func getStatefulSet(g Gomega, namespace, name string) *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sts)).To(Succeed())
	return sts
}

// setStatefulSetReady plays the StatefulSet controller: ready of the desired
// replicas are ready.
func setStatefulSetReady(namespace, name string, ready int32) {
	Eventually(func(g Gomega) {
		sts := getStatefulSet(g, namespace, name)
		base := sts.DeepCopy()
		replicas := max(ptr.Deref(sts.Spec.Replicas, 1), ready)
		sts.Status.ObservedGeneration = sts.Generation
		sts.Status.Replicas = replicas
		sts.Status.CurrentReplicas = replicas
		sts.Status.UpdatedReplicas = replicas
		sts.Status.ReadyReplicas = ready
		sts.Status.AvailableReplicas = ready
		g.Expect(k8sClient.Status().Patch(ctx, sts, client.MergeFrom(base))).To(Succeed())
	}).Should(Succeed())
}

// makeDatabaseReady creates a Database and drives it to Ready.
func makeDatabaseReady(namespace, name string, mutate ...func(*databasev1.Database)) *databasev1.Database {
	newDatabase(namespace, name, mutate...)
	Eventually(func(g Gomega) { getStatefulSet(g, namespace, name) }).Should(Succeed())
	setStatefulSetReady(namespace, name, 1)
	var db *databasev1.Database
	Eventually(func(g Gomega) {
		db = getDatabase(g, namespace, name)
		g.Expect(db.Status.Phase).To(Equal(databasev1.DatabasePhaseReady))
	}).Should(Succeed())
	return db
}

// runJobs lists a Backup's run Jobs, oldest first.
func runJobs(g Gomega, backup *databasev1.Backup) []batchv1.Job {
	list := &batchv1.JobList{}
	g.Expect(k8sClient.List(ctx, list, client.InNamespace(backup.Namespace),
		client.MatchingLabels{labelBackup: backup.Name})).To(Succeed())
	jobs := list.Items
	for i := 1; i < len(jobs); i++ {
		for j := i; j > 0 && jobs[j].Name < jobs[j-1].Name; j-- {
			jobs[j], jobs[j-1] = jobs[j-1], jobs[j]
		}
	}
	return jobs
}

// waitForRunJob waits until the Backup has n run Jobs and returns the newest.
func waitForRunJob(backup *databasev1.Backup, n int, timeout ...time.Duration) *batchv1.Job {
	var job batchv1.Job
	check := func(g Gomega) {
		jobs := runJobs(g, backup)
		g.Expect(jobs).To(HaveLen(n))
		job = jobs[n-1]
	}
	if len(timeout) > 0 {
		Eventually(check, timeout[0], pollInterval).Should(Succeed())
	} else {
		Eventually(check).Should(Succeed())
	}
	return &job
}

// completeJob plays the Job controller for a run whose pod succeeded.
func completeJob(job *batchv1.Job) {
	Eventually(func(g Gomega) {
		current := &batchv1.Job{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(job), current)).To(Succeed())
		base := current.DeepCopy()
		now := metav1.Now()
		start := metav1.NewTime(now.Add(-time.Second))
		current.Status.StartTime = &start
		current.Status.CompletionTime = &now
		current.Status.Succeeded = 1
		current.Status.Active = 0
		current.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached",
				Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached",
				Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
		}
		g.Expect(k8sClient.Status().Patch(ctx, current, client.MergeFrom(base))).To(Succeed())
	}).Should(Succeed())
}

// failJob plays the Job controller for a run whose pods all failed.
func failJob(job *batchv1.Job, message string) {
	Eventually(func(g Gomega) {
		current := &batchv1.Job{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(job), current)).To(Succeed())
		base := current.DeepCopy()
		now := metav1.Now()
		start := metav1.NewTime(now.Add(-time.Second))
		current.Status.StartTime = &start
		current.Status.Failed = backupJobBackoff + 1
		current.Status.Active = 0
		current.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
				Message: message, LastProbeTime: now, LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
				Message: message, LastProbeTime: now, LastTransitionTime: now},
		}
		g.Expect(k8sClient.Status().Patch(ctx, current, client.MergeFrom(base))).To(Succeed())
	}).Should(Succeed())
}

// poke changes an annotation, which makes the controller reconcile the object.
func poke(obj client.Object) {
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		base := obj.DeepCopyObject().(client.Object)
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations["test.example.com/poke"] = time.Now().Format(time.RFC3339Nano)
		obj.SetAnnotations(annotations)
		g.Expect(k8sClient.Patch(ctx, obj, client.MergeFrom(base))).To(Succeed())
	}).Should(Succeed())
}

// eventReasons lists the reasons of the events regarding an object.
func eventReasons(g Gomega, namespace, name string) []string {
	list := &eventsv1.EventList{}
	g.Expect(k8sClient.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}
