// Starting the control plane: free ports, the components in order, each waited for, and the bootstrap objects.

package local

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/controlplane"
	"github.com/labctl/labctl/internal/freeport"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/proc"
	"github.com/labctl/labctl/internal/userr"
)

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
