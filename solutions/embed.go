// Package solutions holds, per lab, where the reference project answers
// each task: README.md (prose) and files.txt (task, file relative to the
// lab's project — operator/, hello-world-operator/ or lab 1.4's CRD — and
// the functions or types that answer it). The code itself stays in the
// projects (embedded, internal/reference.Lookup).
package solutions

import "embed"

// FS holds lab-*/README.md and lab-*/files.txt.
//
//go:embed lab-*
var FS embed.FS
