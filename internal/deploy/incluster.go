package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/cluster/kind"
	"github.com/labctl/labctl/internal/image"
	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/operator"
	"github.com/labctl/labctl/internal/userr"
)

// Annotations labctl reads and writes on the manager Deployment.
const (
	// ImageIDAnnotation (on the Deployment, not its pods) records the
	// image ID last deployed, so a rebuilt image with the same name is
	// noticed and rolled out.
	ImageIDAnnotation = "labctl.dev/image-id"
	// AppliedAnnotation on the manager Deployment lists the objects its
	// deploy applied, so the next deploy deletes those the project no
	// longer has (kube.Applier.Prune).
	AppliedAnnotation = "labctl.dev/applied"
	// RestartedAtAnnotation on the pod template is what `kubectl rollout
	// restart` sets.
	RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"
	// rolloutManager owns the restart annotation: not FieldManager, so
	// the next apply (which does not mention it) does not remove it and
	// roll the pods again.
	rolloutManager = "labctl-rollout"
)

// InClusterOptions tune InCluster.
type InClusterOptions struct {
	Streams *iostreams.IOStreams
	// Image is the manager image as the cluster's nodes know it.
	Image string
	// ImageID is its ID ("" when unknown, e.g. an image in a registry).
	// When the Deployment already ran another ID under the same pod
	// template, the rollout is restarted.
	ImageID string
	// Timeout bounds the wait for the Deployment (default 3 minutes).
	Timeout time.Duration
}

// InCluster deploys p's config/default into the cluster as `make deploy`
// does: the manager container gets opts.Image with imagePullPolicy
// IfNotPresent, everything is applied server-side (field manager labctl),
// then it waits, watching, until the Deployment is rolled out and
// Available. A new image ID under an unchanged pod template restarts the
// rollout (`kubectl rollout restart`), so the new image is what runs.
func InCluster(ctx context.Context, cfg *rest.Config, p *Project, o InClusterOptions) (*operator.Operator, error) {
	s := o.Streams
	if s == nil {
		s, _, _ = iostreams.Test(false)
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	objs, err := p.Render()
	if err != nil {
		return nil, err
	}
	dep, container, err := managerDeployment(objs)
	if err != nil {
		return nil, err
	}
	if o.Image != "" {
		if err := setImage(dep, container, o.Image); err != nil {
			return nil, err
		}
	}
	ann := dep.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if o.ImageID != "" {
		ann[ImageIDAnnotation] = o.ImageID
	}
	applied := kube.RefsOf(objs)
	raw, _ := json.Marshal(applied)
	ann[AppliedAnnotation] = string(raw)
	dep.SetAnnotations(ann)
	ns, name := dep.GetNamespace(), dep.GetName()
	if ns == "" {
		ns = "default"
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	before, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		before = nil
	} else if err != nil {
		return nil, kube.APIError(err, "cannot read Deployment "+ns+"/"+name)
	}

	step := s.StartStep(fmt.Sprintf("Applying %s (%d objects)", p.Name, len(objs)))
	a, err := kube.NewApplier(cfg)
	if err != nil {
		step.Fail()
		return nil, err
	}
	skipped, err := a.Apply(ctx, objs)
	if err != nil {
		step.Fail()
		return nil, userr.Wrap(err, userr.ExitFailure, "cannot apply config/default: "+userr.Message(err),
			"fix the manifest in the project's config/ (`kustomize build config/default` shows what is applied)")
	}
	step.Done()
	for _, sk := range skipped {
		fmt.Fprintf(s.ErrOut, "%s skipped %s %s: %s\n", s.Styles().Warning.Render("!"), sk.Object.GetKind(), sk.Object.GetName(), sk.Reason)
	}

	after, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, kube.APIError(err, "cannot read Deployment "+ns+"/"+name)
	}
	if needsRestart(before, after, o.ImageID) {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{RestartedAtAnnotation: time.Now().UTC().Format(time.RFC3339)}}}}})
		if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: rolloutManager}); err != nil {
			return nil, kube.APIError(err, "cannot restart the rollout of "+ns+"/"+name)
		}
		fmt.Fprintf(s.ErrOut, "New image %s: restarting the rollout of %s/%s\n", shortID(o.ImageID), ns, name)
	}

	if err := waitRolledOut(ctx, cfg, cs, s, ns, name, container, o.Timeout); err != nil {
		return nil, err
	}
	if err := pruneInCluster(ctx, s, a, before, applied); err != nil {
		return nil, err
	}
	sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
	if sa == "" {
		sa = "default"
	}
	return inClusterOperator(cs, p, after, container, sa), nil
}

// pruneInCluster deletes what the deploy before (recorded on its manager
// Deployment, before) applied and this one does not.
func pruneInCluster(ctx context.Context, s *iostreams.IOStreams, a *kube.Applier, before *appsv1.Deployment, applied []kube.ObjectRef) error {
	if before == nil || before.Annotations[AppliedAnnotation] == "" {
		return nil
	}
	var prev []kube.ObjectRef
	if err := json.Unmarshal([]byte(before.Annotations[AppliedAnnotation]), &prev); err != nil {
		fmt.Fprintf(s.ErrOut, "Ignoring the annotation %s of Deployment %s/%s: %v.\n", AppliedAnnotation, before.Namespace, before.Name, err)
		return nil
	}
	pruned, err := a.Prune(ctx, prev, applied)
	for _, r := range pruned {
		fmt.Fprintf(s.ErrOut, "Deleted %s: the project no longer has it.\n", r)
	}
	if err != nil {
		return userr.Wrap(err, userr.ExitFailure, "cannot delete what the project no longer has: "+err.Error(), "delete it with kubectl, then run `labctl up` again")
	}
	return nil
}

// CurrentInCluster describes p's operator as already deployed in the
// cluster (by labctl or `make deploy`), without deploying anything.
func CurrentInCluster(ctx context.Context, cfg *rest.Config, p *Project) (*operator.Operator, error) {
	objs, err := p.Render()
	if err != nil {
		return nil, err
	}
	dep, container, err := managerDeployment(objs)
	if err != nil {
		return nil, err
	}
	ns := dep.GetNamespace()
	if ns == "" {
		ns = "default"
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, dep.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, userr.New(fmt.Sprintf("the operator of %s is not deployed: there is no Deployment %s/%s", p.Name, ns, dep.GetName()),
			"run `labctl up` (or `labctl reset --operator`) to deploy it")
	}
	if err != nil {
		return nil, kube.APIError(err, "cannot read Deployment "+ns+"/"+dep.GetName())
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return inClusterOperator(cs, p, d, container, sa), nil
}

// needsRestart: the Deployment ran before, its pod template did not
// change (else the apply already rolls it out), and the image ID did.
func needsRestart(before, after *appsv1.Deployment, newID string) bool {
	if before == nil || newID == "" {
		return false
	}
	if !equality.Semantic.DeepEqual(before.Spec.Template, after.Spec.Template) {
		return false
	}
	return before.Annotations[ImageIDAnnotation] != newID
}

// managerDeployment finds the manager: the Deployment with a container
// named manager (kubebuilder), else the only Deployment.
func managerDeployment(objs []*unstructured.Unstructured) (*unstructured.Unstructured, string, error) {
	var deps []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" && strings.HasPrefix(o.GetAPIVersion(), "apps/") {
			deps = append(deps, o)
		}
	}
	for _, d := range deps {
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok && m["name"] == "manager" {
				return d, "manager", nil
			}
		}
	}
	if len(deps) == 1 {
		cs, _, _ := unstructured.NestedSlice(deps[0].Object, "spec", "template", "spec", "containers")
		if len(cs) == 1 {
			if m, ok := cs[0].(map[string]any); ok {
				name, _ := m["name"].(string)
				return deps[0], name, nil
			}
		}
	}
	return nil, "", userr.Usage("config/default renders no Deployment with a container named manager",
		"keep kubebuilder's config/manager/manager.yaml (Deployment controller-manager, container manager) in config/default's resources")
}

func setImage(dep *unstructured.Unstructured, container, img string) error {
	cs, _, err := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return err
	}
	for i, c := range cs {
		m, ok := c.(map[string]any)
		if !ok || m["name"] != container {
			continue
		}
		m["image"] = img
		m["imagePullPolicy"] = string(corev1.PullIfNotPresent)
		cs[i] = m
	}
	return unstructured.SetNestedSlice(dep.Object, cs, "spec", "template", "spec", "containers")
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

// inClusterOperator describes the deployed manager.
func inClusterOperator(cs kubernetes.Interface, p *Project, d *appsv1.Deployment, container, sa string) *operator.Operator {
	ns := d.Namespace
	selector := ""
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = sel.String()
	}
	pods := func(ctx context.Context) ([]corev1.Pod, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	return &operator.Operator{
		ProjectName:    p.Name,
		ProjectDir:     p.Dir,
		Namespace:      ns,
		ServiceAccount: sa,
		Identity:       operator.ServiceAccountUser(ns, sa),
		Logs: func(ctx context.Context) ([]byte, error) {
			ps, err := pods(ctx)
			if err != nil {
				return nil, err
			}
			var live []corev1.Pod
			for _, p := range ps {
				if p.DeletionTimestamp == nil {
					live = append(live, p)
				}
			}
			if len(live) == 0 {
				return nil, fmt.Errorf("no manager pod in %s matches %s", ns, selector)
			}
			sort.Slice(live, func(i, j int) bool { return live[j].CreationTimestamp.Before(&live[i].CreationTimestamp) })
			return cs.CoreV1().Pods(ns).GetLogs(live[0].Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		},
		Restarts: func(ctx context.Context) (int, error) {
			ps, err := pods(ctx)
			if err != nil {
				return 0, err
			}
			n := 0
			for _, p := range ps {
				for _, c := range p.Status.ContainerStatuses {
					n += int(c.RestartCount)
				}
			}
			return n, nil
		},
	}
}

// KindOptions tune ToKind.
type KindOptions struct {
	Streams *iostreams.IOStreams
	// Provider finds the cluster's engine and nodes (default a kind
	// provider with default settings).
	Provider *kind.Provider
	// Mode is how the image is built (default $LABCTL_BUILD, else the
	// project's Dockerfile).
	Mode image.Mode
	// Tag is the image name (default $LABCTL_IMAGE, else NAME:latest).
	Tag     string
	Timeout time.Duration
}

// ToKind builds the project's image with the cluster's engine, loads it
// into every node and deploys it in-cluster.
func ToKind(ctx context.Context, c *cluster.Cluster, p *Project, o KindOptions) (*operator.Operator, error) {
	s := o.Streams
	if s == nil {
		s, _, _ = iostreams.Test(false)
	}
	prov := o.Provider
	if prov == nil {
		prov = &kind.Provider{}
	}
	mode := o.Mode
	if mode == "" {
		var err error
		if mode, err = image.ParseMode(os.Getenv("LABCTL_BUILD")); err != nil {
			return nil, err
		}
	}
	tag := o.Tag
	if tag == "" {
		tag = os.Getenv("LABCTL_IMAGE")
	}
	if tag == "" {
		tag = image.DefaultTag(p.Name)
	}
	if err := image.ValidateRef(tag); err != nil {
		return nil, err
	}
	e, nodes, err := prov.Nodes(ctx, c.Name)
	if err != nil {
		return nil, err
	}
	step := s.StartStep(fmt.Sprintf("Building image %s (%s, %s)", tag, mode, e.Name))
	var buildLog io.Writer
	if s.Verbose {
		buildLog = s.ErrOut
	}
	built, err := image.Build(ctx, image.BuildOptions{
		Engine: e, Dir: p.Dir, Tag: tag, Mode: mode,
		Progress: step.Update, Log: buildLog,
	})
	if err != nil {
		step.Fail()
		image.PrintLogTail(s.ErrOut, err)
		return nil, err
	}
	step.Done(shortID(built.ID))
	step = s.StartStep(fmt.Sprintf("Loading %s into %d node(s)", built.Ref, len(nodes)))
	var idCache string
	if c.Env.StateDir != "" {
		idCache = filepath.Join(c.Env.StateDir, "image-ids.json")
	}
	loaded, err := image.Load(ctx, image.LoadOptions{Engine: e, Nodes: nodes, Ref: built.Ref, IDCache: idCache, Progress: step.Update})
	if err != nil {
		step.Fail()
		return nil, err
	}
	if len(loaded.LoadedInto) == 0 {
		step.Skip("already on every node")
	} else {
		step.Done()
	}
	return InCluster(ctx, c.Config, p, InClusterOptions{Streams: s, Image: loaded.Ref, ImageID: loaded.ID, Timeout: o.Timeout})
}

// ExistingOptions tune ToExisting.
type ExistingOptions struct {
	Streams *iostreams.IOStreams
	// Image is an image the cluster can pull (default $LABCTL_IMAGE).
	Image   string
	Timeout time.Duration
}

// ToExisting deploys into a cluster labctl did not create: it cannot load
// images there, so the manager image must be pullable by the cluster.
func ToExisting(ctx context.Context, c *cluster.Cluster, p *Project, o ExistingOptions) (*operator.Operator, error) {
	img := o.Image
	if img == "" {
		img = os.Getenv("LABCTL_IMAGE")
	}
	if img == "" {
		return nil, userr.Usage("deploying into an existing cluster needs an image the cluster can pull",
			"push your image to a registry and set LABCTL_IMAGE=registry/name:tag, or run `labctl up --no-operator` and deploy with `make deploy`")
	}
	if err := image.ValidateRef(img); err != nil {
		return nil, err
	}
	return InCluster(ctx, c.Config, p, InClusterOptions{Streams: o.Streams, Image: img, Timeout: o.Timeout})
}
