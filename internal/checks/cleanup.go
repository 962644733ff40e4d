package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/labctl/labctl/internal/kube"
)

// undoAtEnd has cleanup call undo, newest first.
func (r *run) undoAtEnd(undo func(context.Context) []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.atEnd = append(r.atEnd, undo)
}

func (r *run) remember(k objectKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.created {
		if c == k {
			return
		}
	}
	r.created = append(r.created, k)
}

// cleanup deletes what the run created, newest first, each wait bounded,
// then the namespace (whose own deletion is left to the cluster: the
// namespace controller takes 5-10 s and nothing is gained by waiting).
func (r *run) cleanup(ctx context.Context) []string {
	bound := r.o.CleanupTimeout
	if bound == 0 {
		bound = 30 * time.Second
	}
	// Cleanup runs even when the run's context was cancelled (Ctrl-C).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	var notes []string
	r.mu.Lock()
	atEnd := slices.Clone(r.atEnd)
	r.mu.Unlock()
	for i := len(atEnd) - 1; i >= 0; i-- {
		notes = append(notes, atEnd[i](cctx)...)
	}
	r.mu.Lock()
	created := slices.Clone(r.created)
	held := slices.Clone(r.held)
	r.mu.Unlock()
	for _, k := range append(held, created...) {
		if err := r.releaseHold(cctx, k); err != nil {
			notes = append(notes, fmt.Sprintf("cleanup: could not remove labctl's finalizers from %s %s: %v", k.GVK.Kind, k.Name, oneLine(err)))
		}
	}
	for i := len(created) - 1; i >= 0; i-- {
		k := created[i]
		res := r.dyn.Resource(k.GVR).Namespace(r.ns)
		err := res.Delete(cctx, k.Name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("cleanup: could not delete %s %s: %v", k.GVK.Kind, k.Name, oneLine(err)))
			continue
		}
		per := min(bound/4, time.Until(deadlineOf(cctx)))
		if _, err := r.waitFor(cctx, k.GVR, k.Name, per, kube.Gone); err != nil {
			notes = append(notes, fmt.Sprintf("cleanup: %s %s is still there after %s (a finalizer the operator did not remove?)", k.GVK.Kind, k.Name, per.Round(time.Second)))
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}
	if err := r.client.Delete(cctx, ns); err != nil && !apierrors.IsNotFound(err) {
		notes = append(notes, fmt.Sprintf("cleanup: could not delete namespace %s: %v", r.ns, oneLine(err)))
	}
	return notes
}

// labctlFinalizerPrefix marks the finalizers labctl itself puts on objects.
const labctlFinalizerPrefix = "labctl.io/"

// holdFinalizers reports whether a merge patch sets metadata.finalizers.
func holdFinalizers(merge map[string]any) bool {
	meta, _ := merge["metadata"].(map[string]any)
	list, _ := meta["finalizers"].([]any)
	return len(list) > 0
}

func (r *run) rememberHeld(k objectKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.held, k) {
		r.held = append(r.held, k)
	}
}

// releaseHold removes labctl's own finalizers from an object, if it is
// still there and has any; the write carries the resourceVersion read.
func (r *run) releaseHold(ctx context.Context, k objectKey) error {
	res := r.dyn.Resource(k.GVR).Namespace(r.ns)
	var err error
	for range 3 {
		var u *unstructured.Unstructured
		u, err = res.Get(ctx, k.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		keep := []string{}
		for _, f := range u.GetFinalizers() {
			if !strings.HasPrefix(f, labctlFinalizerPrefix) {
				keep = append(keep, f)
			}
		}
		if len(keep) == len(u.GetFinalizers()) {
			return nil
		}
		data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": keep, "resourceVersion": u.GetResourceVersion()}})
		_, err = res.Patch(ctx, k.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: FieldManager})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}
