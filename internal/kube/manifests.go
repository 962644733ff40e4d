package kube

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// DecodeYAML splits a multi-document YAML stream into objects.
func DecodeYAML(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode YAML: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		out = append(out, u)
	}
}

var applyRank = map[string]int{
	"Namespace": 0, "CustomResourceDefinition": 1, "ServiceAccount": 2,
	"ClusterRole": 3, "Role": 3, "ClusterRoleBinding": 4, "RoleBinding": 4,
}

// SortForApply orders objects so that what others depend on comes first.
func SortForApply(objs []*unstructured.Unstructured) {
	rank := func(u *unstructured.Unstructured) int {
		if r, ok := applyRank[u.GetKind()]; ok {
			return r
		}
		return 10
	}
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i]) < rank(objs[j]) })
}
