// Package solutions holds, per lab, where the reference operator answers
// each task: README.md (prose) and files.txt (task, file relative to
// operator/, and the functions or types that answer it). The code itself
// stays in operator/ (embedded as internal/reference.Source).
package solutions

import "embed"

// FS holds lab-*/README.md and lab-*/files.txt.
//
//go:embed lab-*
var FS embed.FS
