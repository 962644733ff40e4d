// Deleting what was planned and waiting until it is gone; finalizers only as the last resort, and saying which object stuck.

package reset

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/userr"
)

func (c *cleaner) resource(r Ref) dynamic.ResourceInterface {
	if r.Namespace == "" {
		return c.dyn.Resource(r.GVR)
	}
	return c.dyn.Resource(r.GVR).Namespace(r.Namespace)
}

func (c *cleaner) deleteOne(ctx context.Context, r Ref) error {
	bg := metav1.DeletePropagationBackground
	pre := &metav1.Preconditions{UID: &r.UID}
	err := c.resource(r).Delete(ctx, r.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: pre})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return kube.APIError(err, "cannot delete "+r.String())
}

// waitGone watches until every deleted object, every owner and every child
// is gone. Lab objects kept by a finalizer nobody removes (no operator
// running) fail the reset, or with Force lose the finalizer.
func (c *cleaner) waitGone(ctx context.Context, step *iostreams.Step, p *plan) error {
	deadline := time.Now().Add(c.o.Timeout)
	var all []Ref
	all = append(all, p.delete...)
	for _, o := range p.owners {
		if !slices.ContainsFunc(all, func(r Ref) bool { return r.UID == o.UID }) {
			all = append(all, o)
		}
	}
	all = append(all, p.children...)
	// Owners first: a stuck finalizer is the usual reason for waiting.
	sort.SliceStable(all, func(i, j int) bool { return all[i].role < all[j].role })
	for i, r := range all {
		step.Update("%d/%d gone; waiting for %s", i, len(all), r)
		d := deadline
		if c.o.Force && r.role != other {
			// Give a running operator a moment to clean up and remove
			// its finalizer before taking it away.
			if grace := time.Now().Add(c.o.ForceGrace); grace.Before(d) {
				d = grace
			}
		}
		err := c.waitOne(ctx, r, d)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if r.role != other && c.o.Force {
			step.Update("removing finalizers")
			if err := c.stripFinalizers(ctx, p); err != nil {
				return err
			}
			if err := c.waitOne(ctx, r, time.Now().Add(c.o.Timeout)); err == nil {
				continue
			}
		}
		return c.stuckError(ctx, r, err)
	}
	return nil
}

func (c *cleaner) waitOne(ctx context.Context, r Ref, deadline time.Time) error {
	timeout := max(time.Until(deadline), time.Second)
	_, err := kube.WaitFor(ctx, c.o.Config, r.GVR, r.Namespace, r.Name, timeout, func(u *unstructured.Unstructured) (bool, error) {
		// Gone, or replaced by a new object of the same name (an operator
		// recreating a child is not what we wait for).
		return u == nil || u.GetUID() != r.UID, nil
	})
	return err
}

// stripFinalizers removes the finalizers of every lab object being
// deleted (theirs and those in deleted namespaces).
func (c *cleaner) stripFinalizers(ctx context.Context, p *plan) error {
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	for _, o := range p.owners {
		u, err := c.resource(o).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return kube.APIError(err, "cannot read "+o.String())
		}
		if u.GetDeletionTimestamp() == nil || len(u.GetFinalizers()) == 0 {
			continue
		}
		if _, err := c.resource(o).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return kube.APIError(err, "cannot remove the finalizers of "+o.String())
		}
		fmt.Fprintf(c.s.ErrOut, "%s removed finalizers %s from %s\n", c.s.Styles().Warning.Render("!"), strings.Join(u.GetFinalizers(), ", "), o)
	}
	return nil
}

// stuckError explains what is still there.
func (c *cleaner) stuckError(ctx context.Context, r Ref, cause error) error {
	u, err := c.resource(r).Get(context.WithoutCancel(ctx), r.Name, metav1.GetOptions{})
	if err == nil && len(u.GetFinalizers()) > 0 {
		return userr.Wrap(cause, userr.ExitFailure,
			fmt.Sprintf("%s is still being deleted after %s: finalizer %s was not removed", r, c.o.Timeout, strings.Join(u.GetFinalizers(), ", ")),
			"the operator removes it: start the operator (`labctl up`), or run `labctl reset --force` to remove the finalizer")
	}
	if r.role == namespace {
		var resources []string
		for _, lr := range c.labResources {
			if lr.namespaced {
				resources = append(resources, lr.gvr.Resource)
			}
		}
		return userr.Wrap(cause, userr.ExitFailure,
			fmt.Sprintf("%s is still terminating after %s", r, c.o.Timeout),
			fmt.Sprintf("objects with finalizers are left in it (`kubectl get %s -n %s`); `labctl reset --force` removes their finalizers", strings.Join(resources, ","), r.Name))
	}
	return userr.Wrap(cause, userr.ExitFailure,
		fmt.Sprintf("%s was not removed within %s", r, c.o.Timeout),
		"garbage collection may be slow on a loaded machine: run `labctl reset` again, or pass a longer --timeout")
}
