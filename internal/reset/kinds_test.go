package reset

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/labctl/labctl/internal/labs"
	labsfs "github.com/labctl/labctl/labs"
)

func TestLabKindsFromTheLabs(t *testing.T) {
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	kinds, err := LabKinds(all)
	require.NoError(t, err)
	var names []string
	for _, k := range kinds {
		names = append(names, k.Kind)
	}
	// lab-8.2's reset.order first, then the rest by group.
	assert.Equal(t, []string{"Backup", "Database", "Website", "HelloWorld"}, names)
	assert.Equal(t, schema.GroupVersionKind{Group: "database.example.com", Version: "v1", Kind: "Backup"}, kinds[0])
}

func TestLeftoverMatches(t *testing.T) {
	all, err := labs.Load(labsfs.FS)
	require.NoError(t, err)
	los, err := leftovers(all)
	require.NoError(t, err)
	byKind := map[string]leftover{}
	for _, lo := range los {
		byKind[lo.gvk.Kind] = lo
	}
	obj := func(o map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: o} }

	sts := byKind["StatefulSet"]
	assert.True(t, sts.matches(obj(map[string]any{"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "database", "database": "x"}}}})))
	assert.False(t, sts.matches(obj(map[string]any{"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}})))

	svc := byKind["Service"]
	assert.True(t, svc.matches(obj(map[string]any{"spec": map[string]any{"selector": map[string]any{"app": "database"}}})))

	secret := byKind["Secret"]
	creds := obj(map[string]any{"metadata": map[string]any{"name": "db-credentials"}, "data": map[string]any{"username": "YQ==", "password": "Yg=="}})
	assert.True(t, secret.matches(creds))
	creds.SetName("db-tls")
	assert.False(t, secret.matches(creds), "name suffix")
	assert.False(t, secret.matches(obj(map[string]any{"metadata": map[string]any{"name": "x-credentials"}, "data": map[string]any{"token": "YQ=="}})), "data keys")
}

func TestPlanOrderIsValidated(t *testing.T) {
	_, err := labs.Parse("lab-9.9.yaml", []byte(`
apiVersion: labctl.dev/v1alpha1
kind: Lab
id: lab-9.9
title: {en: T, ru: Т}
kinds: {thing: example.com/v1/Thing}
reset:
  order: [other]
  leftovers: [{kind: secret}]
defaults: {timeout: 1s, for: 1s}
tasks: [{id: "1.1", points: 1, title: {en: a, ru: а}, hint: {en: b, ru: б}}]
scenarios:
- name: s
  steps:
  - {id: c, tasks: ["1.1"], title: {en: c, ru: ц}, expect: {ref: thing/x, absent: true}}
`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `reset.order: "other" is not one of the lab's kinds`)
	assert.Contains(t, err.Error(), "reset.leftovers[0]: matches every secret")
}
