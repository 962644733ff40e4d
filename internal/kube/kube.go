// Package kube holds the client plumbing every part of labctl shares: one
// scheme, clients from a rest.Config, and waits that watch instead of sleep.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Scheme knows the built-in types and CRDs (apiextensions).
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// NewClient returns a controller-runtime client (no cache) for cfg.
func NewClient(cfg *rest.Config) (client.Client, error) {
	return client.New(cfg, client.Options{Scheme: Scheme})
}

// Condition decides whether an observed object is what we wait for. It gets
// nil when the object does not exist (or was deleted).
type Condition func(obj *unstructured.Unstructured) (bool, error)

// WaitFor watches one object (by GVR, namespace, name) until cond holds and
// returns the last object observed. It does not poll: it lists once, then
// follows a watch, so it returns as soon as the condition becomes true.
func WaitFor(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, namespace, name string, timeout time.Duration, cond Condition) (*unstructured.Unstructured, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res dynamic.ResourceInterface = dyn.Resource(gvr)
	if namespace != "" {
		res = dyn.Resource(gvr).Namespace(namespace)
	}
	lw := NameListWatch(res, name)
	var last *unstructured.Unstructured
	precondition := func(store cache.Store) (bool, error) {
		item, exists, err := store.GetByKey(key(namespace, name))
		if err != nil {
			return false, err
		}
		if !exists {
			last = nil
			return cond(nil)
		}
		last = item.(*unstructured.Unstructured)
		return cond(last)
	}
	_, err = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, precondition, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			last = nil
			return cond(nil)
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return false, nil
		}
		last = u
		return cond(u)
	})
	if err != nil {
		if ctx.Err() != nil {
			return last, fmt.Errorf("timed out after %s: %w", timeout, context.DeadlineExceeded)
		}
		return last, err
	}
	return last, nil
}

// NameListWatch lists and watches one object by name (a field selector on
// metadata.name), for informers and waits that care about a single object.
func NameListWatch(res dynamic.ResourceInterface, name string) *cache.ListWatch {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return res.Watch(ctx, o)
		},
	}
}

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// GVR returns the resource for a known built-in kind via the client's REST
// mapper (handy with WaitFor).
func GVR(c client.Client, obj runtime.Object) (schema.GroupVersionResource, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	m, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return m.Resource, nil
}

// Exists is a Condition: the object is there.
func Exists(obj *unstructured.Unstructured) (bool, error) { return obj != nil, nil }

// Gone is a Condition: the object is not there.
func Gone(obj *unstructured.Unstructured) (bool, error) { return obj == nil, nil }

// StatusCondition is a Condition on .status.conditions[type].status.
func StatusCondition(condType, status string) Condition {
	return func(obj *unstructured.Unstructured) (bool, error) {
		if obj == nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == condType {
				return m["status"] == status, nil
			}
		}
		return false, nil
	}
}

// IsNoMatch reports whether err means the API does not know the kind (e.g.
// a CRD not yet installed).
func IsNoMatch(err error) bool { return meta.IsNoMatchError(err) }

// ServerVersion asks the API server its version (GitVersion, e.g.
// v1.37.0) once, within timeout, honouring ctx: discovery's own
// ServerVersion takes no context, so a hung server would hold the caller.
func ServerVersion(ctx context.Context, cfg *rest.Config, timeout time.Duration) (string, error) {
	c := rest.CopyConfig(cfg)
	c.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return "", fmt.Errorf("/version: %w", err)
	}
	return info.GitVersion, nil
}

// Ready asks the API server's /readyz once, within timeout: nil when it
// answers ok. Commands use it to tell a broken cluster from a failed check.
func Ready(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := dc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err
	}
	if string(body) != "ok" {
		return fmt.Errorf("/readyz: %s", body)
	}
	return nil
}
