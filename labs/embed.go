// Package labs holds the lab definitions (lab-<module>.<n>.yaml), embedded
// into labctl; internal/labs reads and validates them.
package labs

import "embed"

// FS holds every lab definition.
//
//go:embed *.yaml
var FS embed.FS

// Schema is the JSON Schema of a lab file, generated from internal/labs'
// types (`make generate`). Lab files name it in their first line, for
// editors; the loader checks every lab against it.
//
//go:generate go run ../hack/labschema -src ../internal/labs -o schema/lab.v1alpha1.json
//go:embed schema/lab.v1alpha1.json
var Schema []byte
