// Package labs holds the lab definitions (lab-<module>.<n>.yaml), embedded
// into labctl; internal/labs reads and validates them.
package labs

import "embed"

// FS holds every lab definition.
//
//go:embed *.yaml
var FS embed.FS
