// Package postgresoperator exposes this project's own source files, so the
// labctl tool can deploy it as the course's reference operator and show its
// code as the labs' solutions. The operator itself does not use it.
package postgresoperator

import "embed"

// Source holds the project as kubebuilder lays it out.
//
//go:embed PROJECT go.mod go.sum Makefile Dockerfile cmd api internal config hack
var Source embed.FS
