package checks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// A printer column is judged by what kubectl shows: its header (printed
// upper-cased), the field its path selects and its type, not by how the
// marker spelled them.
func TestJudgeColumn(t *testing.T) {
	crd := []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "phase", Type: "string", JSONPath: ".status['phase']"},
		{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"},
		{Name: "AGE", Type: "date", JSONPath: "{.metadata.creationTimestamp}"},
		{Name: "Ready", Type: "string", JSONPath: ".status.ready"},
	}
	for _, tc := range []struct {
		want columnSpec
		says string
	}{
		{columnSpec{Name: "Phase", JSONPath: ".status.phase", Type: "string"}, ""},
		{columnSpec{Name: "Replicas", JSONPath: ".spec.replicas", Type: "integer"}, ""},
		{columnSpec{Name: "Age", JSONPath: ".metadata.creationTimestamp", Type: "date"}, ""},
		{columnSpec{Name: "Age", JSONPath: ".metadata.creationTimestamp"}, ""},
		{columnSpec{Name: "Replicas", JSONPath: ".status.replicas", Type: "integer"}, "printer column Replicas shows .spec.replicas, not .status.replicas"},
		{columnSpec{Name: "Ready", JSONPath: ".status.ready", Type: "boolean"}, "printer column Ready has type string, not boolean"},
		{columnSpec{Name: "Message", JSONPath: ".spec.message"}, "no printer column Message"},
	} {
		assert.Equal(t, tc.says, judgeColumn(tc.want, crd), "%+v", tc.want)
	}
	assert.True(t, sameJSONPath(".status.phase", "{.status.phase}"))
	assert.False(t, sameJSONPath(".status.phase", ".status.phases"))
	assert.False(t, sameJSONPath(".status.conditions[0].type", ".status.conditions[1].type"))
}
