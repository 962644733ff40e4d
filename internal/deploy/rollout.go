package deploy

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/labctl/labctl/internal/iostreams"
	"github.com/labctl/labctl/internal/kube"
	"github.com/labctl/labctl/internal/userr"
)

// waitRolledOut watches the Deployment until the rollout is complete
// (as `kubectl rollout status`) and it is Available, showing progress.
func waitRolledOut(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, s *iostreams.IOStreams, ns, name, container string, timeout time.Duration) error {
	step := s.StartStep(fmt.Sprintf("Waiting for deployment %s/%s", ns, name))
	last, err := kube.WaitFor(ctx, cfg, appsv1.SchemeGroupVersion.WithResource("deployments"), ns, name, timeout, func(u *unstructured.Unstructured) (bool, error) {
		if u == nil {
			step.Update("not created yet")
			return false, nil
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
			return false, err
		}
		done, msg, err := rolloutStatus(d)
		step.Update("%s", msg)
		return done, err
	})
	if err == nil {
		step.Done()
		return nil
	}
	step.Fail()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return rolloutError(ctx, cs, ns, name, container, last, err)
}

// rolloutStatus says whether the rollout of d is complete, with a short
// progress message.
func rolloutStatus(d *appsv1.Deployment) (bool, string, error) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	msg := fmt.Sprintf("%d/%d updated, %d/%d available", st.UpdatedReplicas, want, st.AvailableReplicas, want)
	if d.Generation > st.ObservedGeneration {
		return false, "waiting for the deployment controller", nil
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return false, msg, fmt.Errorf("rollout exceeded its progress deadline: %s", c.Message)
		}
	}
	if st.UpdatedReplicas < want || st.Replicas > st.UpdatedReplicas || st.AvailableReplicas < st.UpdatedReplicas {
		if st.Replicas > st.UpdatedReplicas {
			msg += fmt.Sprintf(", %d old pods terminating", st.Replicas-st.UpdatedReplicas)
		}
		return false, msg, nil
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue, msg, nil
		}
	}
	return false, msg, nil
}

// rolloutError explains a rollout that did not finish, from the pods'
// states: the image-pull and crash traps of the labs get their own advice.
func rolloutError(ctx context.Context, cs kubernetes.Interface, ns, name, container string, last *unstructured.Unstructured, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	what := fmt.Sprintf("deployment %s/%s did not become Available", ns, name)
	next := fmt.Sprintf("see `kubectl describe deployment -n %s %s` and its pods' events", ns, name)
	if last != nil {
		d := &appsv1.Deployment{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(last.Object, d) == nil {
			_, msg, _ := rolloutStatus(d)
			what += " (" + msg + ")"
			if pod, reason, detail := podTrouble(ctx, cs, d); reason != "" {
				what += fmt.Sprintf(": pod %s is %s", pod, reason)
				if detail != "" {
					what += " (" + detail + ")"
				}
				next = troubleAdvice(reason, ns, name, container, d)
			}
		}
	}
	return userr.Wrap(cause, userr.ExitFailure, what+": "+userr.Message(cause), next)
}

func podTrouble(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment) (pod, reason, detail string) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return "", "", ""
	}
	pods, err := cs.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "", "", ""
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
				return p.Name, w.Reason, firstLineOf(w.Message)
			}
			if t := c.LastTerminationState.Terminated; t != nil && c.RestartCount > 0 {
				return p.Name, "restarting", fmt.Sprintf("exit code %d, %d restarts", t.ExitCode, c.RestartCount)
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return p.Name, "unschedulable", firstLineOf(c.Message)
			}
		}
	}
	return "", "", ""
}

func troubleAdvice(reason, ns, name, container string, d *appsv1.Deployment) string {
	img := ""
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == container {
			img = c.Image
		}
	}
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
		return fmt.Sprintf("the node does not have image %s: it must be loaded into the cluster under exactly that name (Podman builds are localhost/NAME) with imagePullPolicy IfNotPresent; `labctl up` does both", img)
	case "CrashLoopBackOff", "restarting", "Error":
		return fmt.Sprintf("the manager exits: read its log with `kubectl logs -n %s deployment/%s -c %s --previous`", ns, name, container)
	case "CreateContainerConfigError":
		return fmt.Sprintf("a Secret or ConfigMap the manager needs is missing: `kubectl describe pod -n %s` names it", ns)
	case "unschedulable":
		return "no node can run the manager: check its resource requests and the nodes (`kubectl describe nodes`)"
	}
	return fmt.Sprintf("see `kubectl describe pod -n %s` for the pod's events", ns)
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
