// Package local is the provider for machines without a container engine: a
// real control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) run as background processes, with kwok simulating a node
// so pods become Ready, Job pods succeed and PVCs bind.
package local

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/diskfree"
	"github.com/labctl/labctl/internal/freeport"
	"github.com/labctl/labctl/internal/fslock"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/kubeconfig"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/userr"
)

// ProviderName is the --provider value.
const ProviderName = "local"

// startOrder is the order components start in; they stop in reverse.
var startOrder = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// Provider runs local clusters under StateRoot/<name>.
type Provider struct {
	// StateRoot holds one directory per cluster; default
	// $XDG_STATE_HOME/labctl/clusters.
	StateRoot string
	// Binaries returns the control-plane executables (building them if
	// needed). Default: controlplane.Ensure with default options.
	Binaries func(ctx context.Context, s *iostreams.IOStreams) (*controlplane.Binaries, error)
	// TiedToParent makes the processes die with this process (tests).
	TiedToParent bool
	// PickPort returns a free TCP port on 127.0.0.1; replaceable in tests.
	PickPort func() (int, error)
	// ExtraArgs are appended to a component's command line.
	ExtraArgs map[string][]string
	// StartTimeout bounds the whole start-up (default 2 minutes).
	StartTimeout time.Duration
	// MinFree is the free space Up asks of the state directory's disk
	// before it starts anything (0 = minFreeBytes; negative = no check,
	// for tests in which a component meets the full disk itself).
	MinFree int64
	// Operators is how operators run on this provider's clusters
	// (labctl wires it up; nil = labctl cannot run one there).
	Operators cluster.OperatorRunner
}

var _ cluster.Provider = (*Provider)(nil)

// Name implements cluster.Provider.
func (p *Provider) Name() string { return ProviderName }

// ContextName is the kubeconfig context of a local cluster.
func ContextName(name string) string { return "labctl-" + name }

// DefaultStateRoot is $XDG_STATE_HOME/labctl/clusters (~/.local/state/...).
func DefaultStateRoot() string { return cluster.StateDir("clusters") }

func (p *Provider) root() string {
	if p.StateRoot != "" {
		return p.StateRoot
	}
	return DefaultStateRoot()
}

// Dir is the state directory of the named cluster.
func (p *Provider) Dir(name string) string { return filepath.Join(p.root(), name) }

// Up implements cluster.Provider.
func (p *Provider) Up(ctx context.Context, opts cluster.UpOptions) (_ *cluster.Cluster, err error) {
	if runtime.GOOS != "linux" {
		// before the control-plane build, which would take minutes for nothing
		return nil, userr.NeedsLinux("the local provider")
	}
	if err := cluster.ValidateName(opts.Name); err != nil {
		return nil, userr.Usage(err.Error(), "for example: labctl up --provider local --name lab1")
	}
	s := opts.Streams
	if s == nil {
		s, _, _ = iostreams.Test(false)
	}
	// The kubeconfig is written last; a cluster started for a file that
	// cannot take its context would be left running for nothing.
	if !opts.SkipKubeconfigMerge {
		if err := kubeconfig.CheckWritable(opts.KubeconfigPath); err != nil {
			return nil, err
		}
	}
	dir := p.Dir(opts.Name)
	if err := os.MkdirAll(p.root(), 0o755); err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot create %s: %v", p.root(), err), "set XDG_STATE_HOME to a writable directory")
	}
	unlock, err := lock(ctx, dir+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	fresh := false
	var st *state // filled in as its processes start, for the cleanup below
	defer func() {
		// A new cluster that did not come up leaves nothing behind: no
		// process, no state directory or lock, no context. (A restarted
		// one keeps its data for the next try.)
		if err != nil && fresh {
			var ue *userr.Error
			if errors.As(err, &ue) && strings.Contains(ue.Next, dir) {
				// the logs it points to are removed with the directory
				ue.Next = "run the same `labctl up` with -v to see the end of its log"
			}
			_ = stopAll(context.WithoutCancel(ctx), dir, st)
			_ = os.RemoveAll(dir)
			_ = os.Remove(dir + ".lock")
			if !opts.SkipKubeconfigMerge {
				_ = kubeconfig.Remove(opts.KubeconfigPath, ContextName(opts.Name))
			}
		}
	}()

	st, err = loadState(dir)
	var corrupt errCorrupt
	switch {
	case errors.As(err, &corrupt):
		return nil, userr.Wrap(err, userr.ExitFailure,
			fmt.Sprintf("the state of local cluster %q in %s is unreadable (%v)", opts.Name, dir, corrupt.err),
			fmt.Sprintf("run `labctl down --name %s` to remove it, then `labctl up` again", opts.Name))
	case err == nil:
		if p.healthy(ctx, dir, st) {
			c, err := p.clusterFor(dir, st)
			if err != nil {
				return nil, err
			}
			c.Reused = true
			return c, p.mergeKubeconfig(opts, dir, st)
		}
		// Stale: a reboot or a crash took some processes. Stop what is
		// left and start again on the same data, so objects survive.
		fmt.Fprintf(s.ErrOut, "Found local cluster %q stopped (processes gone); restarting it with its data.\n", opts.Name)
		if err := stopAll(ctx, dir, st); err != nil {
			return nil, err
		}
	default: // no state: a new cluster
		if err := os.RemoveAll(dir); err != nil {
			return nil, userr.Wrap(err, userr.ExitFailure, "cannot clear "+dir, "remove it by hand")
		}
		st = &state{Name: opts.Name, Created: time.Now().UTC()}
		fresh = true
	}
	if err := checkFreeSpace(p.root(), p.MinFree); err != nil {
		return nil, err
	}

	step := s.StartStep("Preparing control-plane binaries")
	bins, err := p.binaries(ctx, s, step, opts.BinDir)
	if err != nil {
		step.Fail()
		return nil, err
	}
	step.Done(bins.Source)
	st.BinDir = bins.Dir

	step = s.StartStep(fmt.Sprintf("Starting local cluster %q", opts.Name))
	if err := p.prepare(dir); err != nil {
		step.Fail()
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot write the cluster's files in %s: %v", dir, err), "check the disk and permissions of XDG_STATE_HOME")
	}
	timeout := p.StartTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	startCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.startWithFreePorts(startCtx, s, step, dir, st); err != nil {
		step.Fail()
		_ = stopAll(context.WithoutCancel(ctx), dir, st)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	step.Done()
	c, err := p.clusterFor(dir, st)
	if err != nil {
		return nil, err
	}
	if err := p.mergeKubeconfig(opts, dir, st); err != nil {
		return c, err
	}
	return c, nil
}

func (p *Provider) binaries(ctx context.Context, s *iostreams.IOStreams, step *iostreams.Step, binDir string) (*controlplane.Binaries, error) {
	if p.Binaries != nil && binDir == "" {
		return p.Binaries(ctx, s)
	}
	return controlplane.Ensure(ctx, controlplane.Options{BinDir: binDir, Progress: step.Update, Notice: step.Note})
}

func (p *Provider) prepare(dir string) error {
	l := layout{dir: dir}
	// Only labctl's user may enter a cluster's directory: it holds the
	// PKI, admin kubeconfigs, etcd's data and the audit log.
	for _, d := range []string{dir, l.file("logs"), l.file("kubeconfigs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return err
		}
	}
	if err := l.pki().generate(); err != nil {
		return err
	}
	if err := os.WriteFile(l.file("audit-policy.yaml"), []byte(cluster.AuditPolicy), 0o644); err != nil {
		return err
	}
	return os.WriteFile(l.file("kwok-stages.yaml"), kwokStages, 0o644)
}

// startWithFreePorts starts the cluster, choosing new ports and trying
// again when another program grabs one between choosing and binding.
func (p *Provider) startWithFreePorts(ctx context.Context, s *iostreams.IOStreams, step *iostreams.Step, dir string, st *state) error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		pp, err := p.allocatePorts()
		if err != nil {
			return userr.Wrap(err, userr.ExitFailure, "cannot find free ports on 127.0.0.1: "+err.Error(), "close some programs and try again")
		}
		st.Ports = pp
		st.PIDs = map[string]int{}
		st.Procs = map[string]proc.Record{}
		err = p.start(ctx, s, step, dir, st)
		var busy *portBusyError
		if !errors.As(err, &busy) {
			return err
		}
		lastErr = err
		fmt.Fprintf(s.ErrOut, "Port %d was taken by another program; trying other ports.\n", busy.port)
		_ = stopAll(ctx, dir, st)
	}
	var busy *portBusyError
	errors.As(lastErr, &busy)
	return userr.Wrap(lastErr, userr.ExitFailure, fmt.Sprintf("port %d is in use by another program (%s could not bind it)", busy.port, busy.component),
		"stop the program using it (`ss -ltnp` shows which), then run `labctl up` again")
}

type portBusyError struct {
	component string
	port      int
}

func (e *portBusyError) Error() string {
	return fmt.Sprintf("%s: port %d already in use", e.component, e.port)
}

func (p *Provider) allocatePorts() (ports, error) {
	pick := p.PickPort
	if pick == nil {
		pick = freeport.Get
	}
	var pp ports
	seen := map[int]bool{}
	for _, dst := range []*int{&pp.Etcd, &pp.EtcdPeer, &pp.APIServer, &pp.Kwok} {
		for tries := 0; ; tries++ {
			port, err := pick()
			if err != nil {
				return pp, err
			}
			if !seen[port] || tries > 20 {
				seen[port] = true
				*dst = port
				break
			}
		}
	}
	return pp, nil
}

// start launches every component in order and waits until the cluster can
// run pods: node Ready and the default ServiceAccount present.
func (p *Provider) start(ctx context.Context, s *iostreams.IOStreams, step *iostreams.Step, dir string, st *state) error {
	l := layout{dir: dir}
	if err := p.writeKubeconfigs(l, st); err != nil {
		return err
	}
	if err := st.save(dir); err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot save cluster state: "+err.Error(), "check the disk")
	}
	// ctx is cancelled with the cause when any component exits early.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	launch := func(component string) error {
		spec := proc.Spec{
			Name:         component,
			Path:         filepath.Join(st.BinDir, component),
			Args:         append(l.args(component, st.Ports), p.ExtraArgs[component]...),
			LogFile:      l.log(component),
			Dir:          dir,
			TiedToParent: p.TiedToParent,
		}
		fmt.Fprintf(logHeader(spec.LogFile), "\n==== %s starting %s\n", time.Now().Format(time.RFC3339), strings.Join(spec.Args, " "))
		r, err := proc.Start(spec)
		if err != nil {
			return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot start %s: %v", component, err), "check that "+spec.Path+" is executable, or pass --bin-dir")
		}
		st.PIDs[component] = r.PID
		st.Procs[component] = r.Record()
		go func() {
			select {
			case <-r.Exited:
				cancel(p.diedError(s, l, st, component, r.Err()))
			case <-ctx.Done():
			}
		}()
		return nil
	}
	cause := func(err error) error {
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) && !errors.Is(c, context.DeadlineExceeded) {
			return c
		}
		return err
	}

	step.Update("etcd")
	if err := launch("etcd"); err != nil {
		return err
	}
	etcdTLS, err := clientTLS(l, "etcd-client")
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, fmt.Sprintf("https://127.0.0.1:%d/health", st.Ports.Etcd), etcdTLS); err != nil {
		return cause(p.timeoutError(l, "etcd", err))
	}
	step.Update("kube-apiserver")
	if err := launch("kube-apiserver"); err != nil {
		return err
	}
	tlsCfg, err := adminTLS(l)
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, fmt.Sprintf("https://127.0.0.1:%d/readyz", st.Ports.APIServer), tlsCfg); err != nil {
		return cause(p.timeoutError(l, "kube-apiserver", err))
	}
	step.Update("controllers, scheduler, kwok")
	for _, c := range startOrder[2:] {
		if err := launch(c); err != nil {
			return err
		}
	}
	if err := st.save(dir); err != nil {
		return err
	}
	step.Update("node")
	cfg, err := restConfig(l)
	if err != nil {
		return err
	}
	if err := bootstrap(ctx, cfg); err != nil {
		return cause(userr.Wrap(err, userr.ExitFailure, "cannot create the simulated node: "+err.Error(), "see "+l.log("kube-apiserver")))
	}
	if _, err := kube.WaitFor(ctx, cfg, corev1.SchemeGroupVersion.WithResource("nodes"), "", nodeName, time.Minute, nodeSchedulable); err != nil {
		return cause(p.timeoutError(l, "kwok", fmt.Errorf("node %s did not become Ready: %w", nodeName, err)))
	}
	if _, err := kube.WaitFor(ctx, cfg, corev1.SchemeGroupVersion.WithResource("serviceaccounts"), "default", "default", time.Minute, kube.Exists); err != nil {
		return cause(p.timeoutError(l, "kube-controller-manager", fmt.Errorf("the default ServiceAccount did not appear: %w", err)))
	}
	return st.save(dir)
}

// nodeSchedulable: Ready and without the not-ready taint, which only the
// node-lifecycle controller removes.
func nodeSchedulable(obj *unstructured.Unstructured) (bool, error) {
	if ok, _ := kube.StatusCondition("Ready", "True")(obj); !ok {
		return false, nil
	}
	taints, _, _ := unstructured.NestedSlice(obj.Object, "spec", "taints")
	for _, t := range taints {
		if m, _ := t.(map[string]any); m["key"] == "node.kubernetes.io/not-ready" {
			return false, nil
		}
	}
	return true, nil
}

func logHeader(path string) io.Writer {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return io.Discard
	}
	// Closed by the GC-free path below: the header is tiny, write and close.
	return closeAfterWrite{f}
}

type closeAfterWrite struct{ f *os.File }

func (c closeAfterWrite) Write(b []byte) (int, error) {
	defer c.f.Close()
	return c.f.Write(b)
}

// diedError describes a component that exited during start-up, with the
// tail of its log printed first so the cause is on screen.
func (p *Provider) diedError(s *iostreams.IOStreams, l layout, st *state, component string, exitErr error) error {
	tail := proc.Tail(l.log(component), 40)
	for _, line := range tail {
		if strings.Contains(line, "address already in use") {
			for _, port := range st.Ports.list() {
				if strings.Contains(line, fmt.Sprintf(":%d", port)) {
					return &portBusyError{component: component, port: port}
				}
			}
		}
	}
	for _, line := range tail {
		if strings.Contains(line, "no space left on device") {
			return userr.Wrap(exitErr, userr.ExitEnvironment,
				fmt.Sprintf("the disk of %s is full: %s stopped with \"no space left on device\"; a local cluster needs about %d MiB free", l.dir, component, minFreeBytes>>20),
				"free some space (or set XDG_STATE_HOME to a disk with room), then `labctl up` again")
		}
	}
	if len(tail) > 8 {
		tail = tail[len(tail)-8:]
	}
	if s.Verbose {
		muted := s.Styles().Muted
		fmt.Fprintf(s.ErrOut, "\n%s\n", muted.Render("last lines of "+l.log(component)+":"))
		for _, line := range tail {
			fmt.Fprintln(s.ErrOut, muted.Render("  "+truncate(line, 300)))
		}
	}
	last := errorLine(tail)
	return userr.Wrap(exitErr, userr.ExitFailure, fmt.Sprintf("%s exited during start-up (%v): %s", component, exitErr, last),
		fmt.Sprintf("see %s, then run `labctl down --name %s` and `labctl up` again", l.log(component), st.Name))
}

// errorLine picks the line of a log tail that says what went wrong: Go's
// panic and fatal lines, else the last line mentioning an error, else the
// last line. A stack trace ends in runtime frames that explain nothing.
func errorLine(tail []string) string {
	if len(tail) == 0 {
		return "no output"
	}
	for _, prefix := range []string{"panic: ", "fatal error: "} {
		for _, line := range tail {
			if strings.HasPrefix(line, prefix) {
				return truncate(line, 200)
			}
		}
	}
	for i := len(tail) - 1; i >= 0; i-- {
		if l := strings.ToLower(tail[i]); strings.Contains(l, "error") || strings.Contains(l, "fatal") {
			return truncate(tail[i], 200)
		}
	}
	return truncate(tail[len(tail)-1], 200)
}

// minFreeBytes is what a new local cluster needs on the state directory's
// disk: etcd preallocates a 64 MiB WAL segment, then its database, the
// logs and the audit log grow while labs run.
const minFreeBytes = 300 << 20

func checkFreeSpace(dir string, need int64) error {
	switch {
	case need < 0:
		return nil
	case need == 0:
		need = minFreeBytes
	}
	free, err := diskfree.Available(dir)
	if err != nil {
		return nil // cannot tell; the start-up will say what fails
	}
	if free >= uint64(need) {
		return nil
	}
	return userr.Env(fmt.Sprintf("not enough disk space for a local cluster in %s: %d MiB free, it needs about %d MiB", dir, free>>20, need>>20),
		"free some space, or set XDG_STATE_HOME to a disk with room")
}

func (p *Provider) timeoutError(l layout, component string, err error) error {
	last := proc.Tail(l.log(component), 1)
	detail := ""
	if len(last) > 0 {
		detail = "; its log ends: " + truncate(last[0], 200)
	}
	return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("%s did not become ready: %v%s", component, err, detail),
		"see "+l.log(component)+"; a loaded machine may need a retry")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// waitHTTP waits until url answers 200. A process that has not bound its
// port yet offers nothing to watch, so this polls, briefly and bounded by
// ctx, which is cancelled the moment the process exits.
func waitHTTP(ctx context.Context, url string, tlsCfg *tls.Config) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("%s answered %s", url, resp.Status)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func adminTLS(l layout) (*tls.Config, error) { return clientTLS(l, "admin") }

// clientTLS authenticates with the pki's pair name.{crt,key}.
func clientTLS(l layout, name string) (*tls.Config, error) {
	k := l.pki()
	cert, err := tls.LoadX509KeyPair(k.path(name+".crt"), k.path(name+".key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(k.path("ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// writeKubeconfigs writes one kubeconfig per client identity plus the
// cluster's admin kubeconfig (dir/kubeconfig, context labctl-NAME).
func (p *Provider) writeKubeconfigs(l layout, st *state) error {
	k := l.pki()
	server := fmt.Sprintf("https://127.0.0.1:%d", st.Ports.APIServer)
	ca, err := os.ReadFile(k.path("ca.crt"))
	if err != nil {
		return err
	}
	for file := range clientUsers {
		cfg, err := adminConfig(k, file, ContextName(st.Name), server, ca)
		if err != nil {
			return err
		}
		path := l.kubeconfig(file)
		if file == "admin" {
			path = l.file("kubeconfig")
		}
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			return err
		}
	}
	return nil
}

func adminConfig(k pki, file, name, server string, ca []byte) (*clientcmdapi.Config, error) {
	crt, err := os.ReadFile(k.path(file + ".crt"))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(k.path(file + ".key"))
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return cfg, nil
}

func restConfig(l layout) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", l.file("kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// bootstrap creates the simulated node and the default StorageClass.
func bootstrap(ctx context.Context, cfg *rest.Config) error {
	c, err := kube.NewClient(cfg)
	if err != nil {
		return err
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/hostname": nodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"type": "kwok", "ingress-ready": "true",
			},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("250")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("250")},
		},
	}
	if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	sc := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: storageClass, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: "labctl.dev/kwok-volume",
	}
	if err := c.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (p *Provider) mergeKubeconfig(opts cluster.UpOptions, dir string, st *state) error {
	if opts.SkipKubeconfigMerge {
		return nil
	}
	path := opts.KubeconfigPath
	if path == "" {
		path = kubeconfig.DefaultPath()
	}
	if err := kubeconfig.MergeFile(path, layout{dir}.file("kubeconfig"), ContextName(st.Name)); err != nil {
		return err
	}
	st.UserKubeconfig = path
	return st.save(dir)
}

// healthy reports whether every component of st runs and the API answers.
func (p *Provider) healthy(ctx context.Context, dir string, st *state) bool {
	for _, c := range startOrder {
		if !st.alive(dir, c) {
			return false
		}
	}
	tlsCfg, err := adminTLS(layout{dir})
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return waitHTTP(ctx, fmt.Sprintf("https://127.0.0.1:%d/readyz", st.Ports.APIServer), tlsCfg) == nil
}

// alive: the component's recorded process runs (same pid, same start
// time: pids are reused after a reboot).
func (st *state) alive(dir, component string) bool {
	if r, ok := st.Procs[component]; ok {
		return r.Alive()
	}
	return ownedAlive(dir, st.PIDs[component]) // a state written before records
}

// ownedAlive: pid runs and its command line names this cluster's
// directory (state files without records).
func ownedAlive(dir string, pid int) bool {
	if !proc.Alive(pid) {
		return false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(raw), dir)
}

func (p *Provider) clusterFor(dir string, st *state) (*cluster.Cluster, error) {
	l := layout{dir: dir}
	cfg, err := restConfig(l)
	if err != nil {
		return nil, userr.Wrap(err, userr.ExitFailure, "cannot read the cluster's kubeconfig: "+err.Error(), fmt.Sprintf("run `labctl down --name %s` and `labctl up` again", st.Name))
	}
	return &cluster.Cluster{
		Name:       st.Name,
		Provider:   ProviderName,
		Context:    ContextName(st.Name),
		Kubeconfig: l.file("kubeconfig"),
		Config:     cfg,
		Operators:  p.Operators,
		Env: cluster.Env{
			RealPods: false,
			StateDir: dir,
			AuditLog: func(context.Context) (io.ReadCloser, error) { return os.Open(l.auditLog()) },
		},
	}, nil
}

// existing reads the state of the cluster name: cluster.ErrNotFound when
// there is none, a usage error for a name labctl never gives.
func (p *Provider) existing(name string) (string, *state, error) {
	if err := cluster.ValidateName(name); err != nil {
		return "", nil, userr.Usage(err.Error(), "pass the name given to `labctl up --name`")
	}
	dir := p.Dir(name)
	st, err := loadState(dir)
	if errors.Is(err, errNoState) {
		return "", nil, fmt.Errorf("local cluster %q: %w", name, cluster.ErrNotFound)
	}
	if err != nil {
		return "", nil, unreadableState(name, err)
	}
	return dir, st, nil
}

// Get implements cluster.Provider.
func (p *Provider) Get(ctx context.Context, name string) (*cluster.Cluster, error) {
	dir, st, err := p.existing(name)
	if err != nil {
		return nil, err
	}
	if !p.healthy(ctx, dir, st) {
		return nil, userr.New(fmt.Sprintf("local cluster %q is not running", name), fmt.Sprintf("run `labctl up --provider local --name %s` to start it again", name))
	}
	return p.clusterFor(dir, st)
}

func unreadableState(name string, err error) error {
	return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("the state of local cluster %q is unreadable (%v)", name, err),
		fmt.Sprintf("run `labctl down --name %s`, then `labctl up` again", name))
}

// Down implements cluster.Provider: it stops every process that belongs
// to the cluster (found by its state directory, so it works after a crash
// or with a corrupt state file), removes the kubeconfig context and the
// directory.
func (p *Provider) Down(ctx context.Context, name string) error {
	if err := cluster.ValidateName(name); err != nil {
		return userr.Usage(err.Error(), "pass the name given to `labctl up --name`")
	}
	dir := p.Dir(name)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return userr.Wrap(fmt.Errorf("local cluster %q: %w", name, cluster.ErrNotFound), userr.ExitFailure,
			fmt.Sprintf("there is no local cluster named %q", name), "`labctl status` shows the clusters that exist")
	}
	unlock, err := lock(ctx, dir+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	st, _ := loadState(dir)
	if err := stopAll(ctx, dir, st); err != nil {
		return err
	}
	kcPath := ""
	if st != nil {
		kcPath = st.UserKubeconfig
	}
	// Removing the cluster never depends on the user's kubeconfig: an
	// unreadable one is reported after the cluster is gone.
	var kcErr error
	if st == nil || kcPath != "" {
		kcErr = kubeconfig.Remove(kcPath, ContextName(name))
	}
	if err := os.RemoveAll(dir); err != nil {
		return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("stopped the cluster but cannot remove %s: %v", dir, err), "remove it by hand")
	}
	_ = os.Remove(dir + ".lock")
	if kcErr != nil {
		return &cluster.Warning{Err: userr.Wrap(kcErr, userr.ExitFailure,
			fmt.Sprintf("the cluster is deleted, but its context %s is still in your kubeconfig (%s)", ContextName(name), userr.Message(kcErr)),
			fmt.Sprintf("fix the file, then `kubectl config delete-context %s`", ContextName(name)))}
	}
	return nil
}

// stopAll stops every process of the cluster in dir that labctl recorded:
// operators' supervisors first (their record files under operators/),
// then the control plane in reverse start order. Only recorded processes
// (pid and start time) are stopped, never one found by its command line.
func stopAll(ctx context.Context, dir string, st *state) error {
	type target struct {
		name string
		rec  proc.Record
	}
	var targets []target
	for _, r := range proc.LoadRecords(filepath.Join(dir, "operators", "*", proc.SupervisorRecord)) {
		targets = append(targets, target{"operator supervisor", r})
	}
	if st != nil {
		for i := len(startOrder) - 1; i >= 0; i-- {
			c := startOrder[i]
			if r, ok := st.Procs[c]; ok {
				targets = append(targets, target{c, r})
			} else if pid := st.PIDs[c]; ownedAlive(dir, pid) { // a state written before records
				st, _ := proc.StartTime(pid)
				targets = append(targets, target{c, proc.Record{PID: pid, Start: st}})
			}
		}
	}
	for _, t := range targets {
		if err := proc.StopRecord(ctx, t.rec, 10*time.Second); err != nil {
			return userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot stop %s (pid %d): %v", t.name, t.rec.PID, err), fmt.Sprintf("kill it by hand: kill -9 %d", t.rec.PID))
		}
	}
	return nil
}

// Status implements cluster.Provider.
func (p *Provider) Status(ctx context.Context, name string) (*cluster.Health, error) {
	dir, st, err := p.existing(name)
	if err != nil {
		return nil, err
	}
	out := &cluster.Health{Name: name, Provider: ProviderName, Context: ContextName(name), Running: true}
	tlsCfg, _ := adminTLS(layout{dir})
	for _, c := range startOrder {
		pid := st.PIDs[c]
		comp := cluster.Component{Name: c, PID: pid, Healthy: st.alive(dir, c)}
		switch c {
		case "etcd":
			comp.Address = fmt.Sprintf("127.0.0.1:%d", st.Ports.Etcd)
		case "kube-apiserver":
			comp.Address = fmt.Sprintf("127.0.0.1:%d", st.Ports.APIServer)
			if comp.Healthy && tlsCfg != nil {
				hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				if err := waitHTTP(hctx, "https://"+comp.Address+"/readyz", tlsCfg); err != nil {
					comp.Healthy, comp.Detail = false, "not ready: "+err.Error()
				}
				cancel()
			}
		case "kwok":
			comp.Address = fmt.Sprintf("127.0.0.1:%d", st.Ports.Kwok)
		}
		if comp.Healthy {
			comp.RSSBytes, comp.PSSBytes = proc.Memory(pid)
		} else if comp.Detail == "" {
			comp.Detail = "not running"
		}
		out.Running = out.Running && comp.Healthy
		out.Components = append(out.Components, comp)
	}
	// Other processes of this cluster: operator supervisors labctl started.
	for _, r := range proc.LoadRecords(filepath.Join(dir, "operators", "*", proc.SupervisorRecord)) {
		if !r.Alive() {
			continue
		}
		rss, pss := proc.Memory(r.PID)
		out.Components = append(out.Components, cluster.Component{Name: "operator", PID: r.PID, Healthy: true, RSSBytes: rss, PSSBytes: pss, Detail: "operator"})
	}
	return out, nil
}

// List returns the names of the local clusters that have a state directory.
func (p *Provider) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(p.root())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func lock(ctx context.Context, path string) (func(), error) {
	unlock, err := fslock.Lock(ctx, path)
	if err != nil && ctx.Err() == nil {
		return nil, userr.Wrap(err, userr.ExitFailure, fmt.Sprintf("cannot lock %s: %v", path, err), "check permissions of XDG_STATE_HOME")
	}
	return unlock, err
}
