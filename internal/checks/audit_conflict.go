package checks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

type conflictParams struct {
	// Database is the custom resource whose image is changed.
	Database labs.Ref `json:"database"`
	// StatefulSet is the child the operator updates, and labctl touches.
	StatefulSet labs.Ref `json:"statefulset"`
	// Container is the container whose image the operator sets.
	Container string `json:"container"`
	// Images are set on the Database one after another; the last one is
	// the image the Database is left with.
	Images []string `json:"images"`
	// Spares are more images, set one after another before the last of
	// Images while no conflict has been provoked yet: a conflict is a race
	// labctl can make likely, not certain, so it gets more tries.
	Spares []string `json:"spares,omitempty"`
}

func (p *conflictParams) Validate() error {
	if p.Database.IsZero() || p.StatefulSet.IsZero() || p.Container == "" || len(p.Images) == 0 {
		return errors.New("needs database, statefulset, container and images")
	}
	seen := map[string]bool{}
	for _, img := range append(slices.Clone(p.Images), p.Spares...) {
		if seen[img] {
			// The retry's image is judged by its place in the sequence.
			return fmt.Errorf("image %q is listed twice: images and spares must all differ", img)
		}
		seen[img] = true
	}
	return nil
}

// conflictWriters is how many goroutines touch the StatefulSet at once.
// One is enough for a conflict on a good share of the operator's updates;
// two starve an operator that has no retry of any moment to land its
// update, and its requeue backoff then outgrows the check (a no-retry
// operator still converges, which is all this check asks of it). The
// writer also stops at the operator's first conflict, which is all the
// judgement needs: on a quiet machine one writer kept going caused eleven
// 409s in a row, whose backoff (5 ms doubled each time) outgrew the check.
const conflictWriters = 1

// conflictPoll is how often the audit log is read for the operator's
// first conflict while the writer touches.
const conflictPoll = 100 * time.Millisecond

// runProvokeConflict changes the Database's image while writers touch an
// annotation of the StatefulSet in a tight loop, so the operator's update
// (read, change, PUT with the read resourceVersion) is likely to find the
// object changed under it. The audit log then tells what happened. While
// no conflict has shown up, spare images give the operator more updates to
// race with.
func runProvokeConflict(ctx context.Context, c *Context, p *conflictParams) Outcome {
	if out, ok := c.auditPreconditions(); !ok {
		return out
	}
	dbGVR, err := c.Resolve(p.Database)
	if err != nil {
		return errorf("%v", err)
	}
	stsGVR, err := c.Resolve(p.StatefulSet)
	if err != nil {
		return errorf("%v", err)
	}
	ns := c.Namespace()
	sts := c.Dynamic().Resource(stsGVR).Namespace(ns)
	if _, err := c.WaitFollowing(ctx, stsGVR, p.StatefulSet.Name, c.Timeout, kube.Exists); err != nil {
		return errorf("%s is needed to provoke a conflict, and the operator did not create it: %v", p.StatefulSet, oneLine(err))
	}
	start := time.Now()

	touchCtx, stopTouch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var touches atomic.Int64
	for w := range conflictWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; touchCtx.Err() == nil; n++ {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"labctl.io/touch-%d":"%d"}}}`, w, n)
				if _, err := sts.Patch(touchCtx, p.StatefulSet.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: FieldManager}); err == nil {
					touches.Add(1)
				} else if apierrors.IsNotFound(err) {
					return
				}
			}
		}()
	}
	stopWriters := func() {
		stopTouch()
		wg.Wait()
	}
	imageIs := func(image string) kube.Condition {
		return func(u *unstructured.Unstructured) (bool, error) { return containerImage(u, p.Container) == image, nil }
	}
	// The operator changes only the StatefulSet's spec (no pods needed), in
	// milliseconds: a few seconds per image is plenty on any cluster, and
	// keeps the writers from hammering one that never converges.
	per := min(c.Timeout/time.Duration(len(p.Images)+1), 3*time.Second)
	var set []string
	id := c.Operator().Identity
	conflicted := false
	// awaitImage waits up to per for the StatefulSet to carry image; while
	// the writer touches, it also reads the audit log and stops the writer
	// at the operator's first conflict.
	awaitImage := func(image string) {
		deadline := time.Now().Add(per)
		for {
			if !conflicted {
				if ops, err := operatorWritesSince(ctx, c, id, stsGVR, ns, p.StatefulSet.Name, start); err == nil {
					if _, n := countWrites(ops); n > 0 {
						conflicted = true
						stopWriters()
					}
				}
			}
			if u, err := sts.Get(ctx, p.StatefulSet.Name, metav1.GetOptions{}); err == nil {
				if ok, _ := imageIs(image)(u); ok {
					return
				}
			}
			if !time.Now().Before(deadline) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(conflictPoll):
			}
		}
	}
	setImage := func(image string) error {
		patch := fmt.Sprintf(`{"spec":{"image":%q}}`, image)
		if _, err := c.Dynamic().Resource(dbGVR).Namespace(ns).Patch(ctx, p.Database.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("setting %s spec.image: %v", p.Database, oneLine(err))
		}
		set = append(set, image)
		awaitImage(image)
		return nil
	}
	operatorWrites := func() ([]AuditEvent, error) {
		return operatorWritesSince(ctx, c, id, stsGVR, ns, p.StatefulSet.Name, start)
	}

	last := p.Images[len(p.Images)-1]
	for _, image := range p.Images[:len(p.Images)-1] {
		if err := setImage(image); err != nil {
			stopWriters()
			return errorf("%v", err)
		}
	}
	// Spares while the operator updates but nothing conflicted, keeping
	// time for the last image.
	for i := 0; i < len(p.Spares) && time.Since(start) < c.Timeout-per; i++ {
		ops, err := operatorWrites()
		if err != nil {
			stopWriters()
			return errorf("%v", err)
		}
		if updates, conflicts := countWrites(ops); len(set) > 0 && (updates == 0 || conflicts > 0) {
			break
		}
		// A spare the cluster refuses (a student's stricter validation) is
		// just one try fewer.
		_ = setImage(p.Spares[i])
	}
	if err := setImage(last); err != nil {
		stopWriters()
		return errorf("%v", err)
	}
	stopWriters()
	// A fixed window: an operator that only converges at its next requeue
	// after the conflict lost the update (see per above).
	final, finalErr := c.WaitFor(ctx, stsGVR, p.StatefulSet.Name, per, imageIs(last))

	ops, err := operatorWrites()
	if err != nil {
		return errorf("%v", err)
	}
	out := Outcome{Object: final, Related: []string{p.StatefulSet.Name, p.Database.Name}}
	out.Notes = append(out.Notes, fmt.Sprintf("labctl changed the image %d times while touching %s %d times", len(set), p.StatefulSet, touches.Load()))
	firstConflict := slices.IndexFunc(ops, func(ev AuditEvent) bool { return ev.Code() == 409 })
	updates, conflicts := countWrites(ops)
	if finalErr != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("%s kept image %q instead of %q", p.StatefulSet, containerImage(final, p.Container), last))
	}
	out.Expected = "after a 409 Conflict, a successful write by the operator (it re-read and retried)"
	if firstConflict < 0 {
		if updates == 0 {
			return Outcome{Status: report.Skipped, Related: out.Related, Notes: out.Notes,
				Message: fmt.Sprintf("the operator never sent an update (PUT) to %s during the test (%d patches): an operator that only patches cannot hit a conflict, so there was nothing to retry", p.StatefulSet, len(ops))}
		}
		return Outcome{Status: report.Skipped, Related: out.Related, Notes: out.Notes,
			Message: fmt.Sprintf("no conflict could be provoked: all %d of the operator's updates to %s landed between labctl's writes", updates, p.StatefulSet)}
	}
	if lost := lostChanges(ops, p.Container, set); len(lost) > 0 {
		out.Status = report.Fail
		out.Expected = "after a 409 Conflict, a retry that re-reads the object and applies the change again"
		out.Observed = strings.Join(lost, "; ")
		out.Message = fmt.Sprintf("the operator retried its update of %s after a conflict, but the retry lost the change: it re-sent the re-read object without applying the new image to it (re-apply your change inside the retry function, after the Get)", p.StatefulSet)
		return out
	}
	for _, ev := range ops[firstConflict+1:] {
		if ev.Code() >= 200 && ev.Code() < 300 {
			out.Status = report.Pass
			out.Message = fmt.Sprintf("the operator hit %d conflict(s) (409) updating %s and retried: %s succeeded %s after the first conflict",
				conflicts, p.StatefulSet, method(ev.Verb), roundDur(ev.RequestReceivedTimestamp.Sub(ops[firstConflict].RequestReceivedTimestamp)))
			return out
		}
	}
	out.Status = report.Fail
	out.Observed = fmt.Sprintf("%d conflict(s) (409), then no successful write", conflicts)
	out.Message = fmt.Sprintf("the operator's update of %s failed with 409 Conflict and it never wrote it successfully afterwards", p.StatefulSet)
	return out
}

// operatorWritesSince is what the operator (id) sent to change the named
// object (updates and patches of the object itself, not its status) since
// start, from the audit log.
func operatorWritesSince(ctx context.Context, c *Context, id string, gvr schema.GroupVersionResource, ns, name string, start time.Time) ([]AuditEvent, error) {
	evs, err := c.syncAudit(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %v", err)
	}
	var ops []AuditEvent
	for _, ev := range evs {
		if ev.By(id) && ev.On(gvr, ns, name) && (ev.Verb == "update" || ev.Verb == "patch") &&
			ev.subresource() == "" && !ev.RequestReceivedTimestamp.Before(start) {
			ops = append(ops, ev)
		}
	}
	return ops, nil
}

// countWrites counts the operator's updates (PUT) and its writes that
// conflicted (409).
func countWrites(ops []AuditEvent) (updates, conflicts int) {
	for _, ev := range ops {
		if ev.Verb == "update" {
			updates++
		}
		if ev.Code() == 409 {
			conflicts++
		}
	}
	return updates, conflicts
}

// lostChanges compares each successful update that follows 409s with the
// updates that conflicted (their bodies, where the audit log has them): the
// retry must carry the newest image a conflicted write was setting, or a
// later one of images. A retry that lost the change may itself conflict
// (it re-sends the old image), so the newest intended image counts, not the
// last conflicted body. A retry that conflicts again with an older image
// has lost it as well. It describes each retry that did not carry it.
func lostChanges(ops []AuditEvent, container string, images []string) []string {
	imageOf := func(ev AuditEvent) string {
		if len(ev.RequestObject) == 0 {
			return ""
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(ev.RequestObject); err != nil {
			return ""
		}
		return containerImage(u, container)
	}
	var lost []string
	intended := ""
	for _, ev := range ops {
		if ev.Verb != "update" {
			continue
		}
		img := imageOf(ev)
		switch {
		case ev.Code() == 409:
			if img != "" && intended != "" && slices.Index(images, img) < slices.Index(images, intended) {
				// The retry lost the change even if it never landed:
				// when the writer outlasts all of its attempts, the
				// reconcile after them re-applies the change, and only
				// the retries' own bodies show what they dropped.
				lost = append(lost, fmt.Sprintf("the update that conflicted set image %s, its retry sent %s (and conflicted too)", intended, img))
				intended = ""
				continue
			}
			if img != "" && (intended == "" || slices.Index(images, img) > slices.Index(images, intended)) {
				intended = img
			}
		case ev.Code() >= 200 && ev.Code() < 300:
			want := slices.Index(images, intended)
			if intended != "" && img != "" && want >= 0 && slices.Index(images, img) < want {
				lost = append(lost, fmt.Sprintf("the update that conflicted set image %s, the retry that succeeded sent %s", intended, img))
			}
			intended = ""
		}
	}
	return lost
}

func containerImage(u *unstructured.Unstructured, name string) string {
	if u == nil {
		return ""
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for _, ct := range containers {
		m, _ := ct.(map[string]any)
		if m["name"] == name {
			s, _ := m["image"].(string)
			return s
		}
	}
	return ""
}
