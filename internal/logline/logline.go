// Package logline picks and shortens the lines of a log that a person is
// shown: the one line that says why a process failed, cut to fit a message.
package logline

import "strings"

// Cut shortens s to at most n bytes plus an ellipsis, never inside a UTF-8
// character (a Russian log line stays readable).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// Cause picks the line of a log's tail that says what went wrong: Go's
// panic or fatal error line, else the last line mentioning an error, else
// the last line. A stack trace ends in source frames
// (/usr/lib/go/src/runtime/proc.go:290) that explain nothing, so those
// are skipped even when a path happens to contain "error".
func Cause(tail []string) string {
	if len(tail) == 0 {
		return "no output"
	}
	for _, prefix := range []string{"panic: ", "fatal error: "} {
		for _, line := range tail {
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
	}
	for i := len(tail) - 1; i >= 0; i-- {
		l := strings.ToLower(tail[i])
		if strings.HasPrefix(strings.TrimSpace(l), "/") {
			continue
		}
		if strings.Contains(l, "error") || strings.Contains(l, "fatal") {
			return tail[i]
		}
	}
	return tail[len(tail)-1]
}
