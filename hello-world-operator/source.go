// Package helloworldoperator exposes this project's own source files, so the
// labctl tool can deploy it as the reference operator of the course's Hello
// World labs (2.4, 3.1) and show its code as their solutions. The operator
// itself does not use it.
package helloworldoperator

import "embed"

// Source holds the project as kubebuilder lays it out.
//
//go:embed PROJECT go.mod go.sum Makefile Dockerfile cmd api internal config hack
var Source embed.FS
