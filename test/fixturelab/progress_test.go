package fixturelab

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/labctl/labctl/internal/checks"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// progressLab waits 1 s for configmap/target, following the operator's
// progress for 1.5 s after each change, up to 20 s.
const progressLab = `
apiVersion: labctl.dev/v1alpha1
kind: Lab
id: lab-0.2
module: 0
title: {en: Waits follow the operator, ru: Ожидания следуют за оператором}
defaults:
  timeout: {local: 1s, kind: 1s}
  for: {local: 1s, kind: 1s}
  progress: {idle: {local: 1500ms, kind: 1500ms}, each: {local: 20s, kind: 20s}}
tasks:
- id: "1.1"
  points: 100
  title: {en: target comes, ru: target появляется}
  hint: {en: create it, ru: создайте его}
scenarios:
- name: target
  title: {en: target, ru: target}
  steps:
  - apply: {object: {apiVersion: v1, kind: ConfigMap, metadata: {name: start}}}
  - id: target
    tasks: ["1.1"]
    title: {en: target is created, ru: target создан}
    expect:
      ref: configmap/target
      eventually:
      - {path: metadata.name, equals: target}
`

// slowOperator waits for configmap/start in ns, then creates a ConfigMap
// every 500ms, `steps` of them, and then, if finish, configmap/target:
// an operator that takes several times the wait's timeout, visibly
// working all along.
func slowOperator(ctx context.Context, ns string, steps int, finish bool) {
	owner := client.FieldOwner("slow-operator")
	for {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "start"}, &corev1.ConfigMap{})
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	create := func(name string) {
		_ = env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, owner)
	}
	for i := range steps {
		time.Sleep(500 * time.Millisecond)
		create(fmt.Sprintf("work-%d", i))
	}
	if finish {
		time.Sleep(500 * time.Millisecond)
		create("target")
	}
}

// A wait goes on past its timeout while the operator keeps changing
// things, and ends soon after it stops: a slow operator that gets there
// passes, one that stops halfway fails long before the cap, and one that
// does nothing fails at the timeout; one busy forever fails at the cap.
func TestWaitsFollowTheOperatorsProgress(t *testing.T) {
	if env == nil {
		t.Skip("needs the local cluster (not in -short)")
	}
	lab, err := labs.Parse("progress", []byte(progressLab))
	require.NoError(t, err)
	cases := []struct {
		name   string
		steps  int
		finish bool
		pass   bool
		says   string
		atMost time.Duration
		// atLeast: a wait that ends at its cap, not before.
		atLeast time.Duration
	}{
		{"slow but working", 7, true, true, "", 0, 0},
		{"stops halfway", 2, false, false, "changes to the operator's configmaps and the namespace's [a-zA-Z, ]+ meanwhile", 8 * time.Second, 0},
		// A new namespace may get its kube-root-ca.crt from the controller
		// manager while the wait runs: that is somebody working too.
		{"does nothing", 0, false, false, `(none of the operator's configmaps and the namespace's [a-zA-Z, ]+ changed|1 change to the operator's configmaps and the namespace's [a-zA-Z, ]+) meanwhile`, 8 * time.Second, 0},
		// Busy forever and never done (a status that changes on every
		// reconcile): following its progress ends at the cap, 1 s + 20 s.
		{"busy forever", 100, false, false, `the most this step may take: .* while the operator's configmaps and the namespace's [a-zA-Z, ]+ kept changing`, 25 * time.Second, 20 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ns := checks.NamespaceName(lab.ID)
			go slowOperator(ctx, ns, c.steps, c.finish)
			var took time.Duration
			rep, err := checks.Run(ctx, checks.Options{Lab: lab, Cluster: env.Cluster, Namespace: ns,
				OnCheck: func(r *report.CheckResult) { took = time.Duration(r.Duration) }})
			require.NoError(t, err)
			check := rep.Tasks[0].Checks[0]
			if c.pass {
				assert.Equal(t, report.Pass, check.Status, check.Message)
				assert.Greater(t, took, 3*time.Second, "the operator took 4 s: more than the 1 s timeout")
				return
			}
			assert.Equal(t, report.Fail, check.Status, check.Message)
			assert.Regexp(t, c.says, check.Message)
			assert.Less(t, took, c.atMost, "the wait ends soon after the operator stops, and at its 21 s cap at the latest")
			assert.GreaterOrEqual(t, took, c.atLeast)
		})
	}
}
