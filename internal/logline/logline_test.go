package logline

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestCutKeepsCharactersWhole(t *testing.T) {
	assert.Equal(t, "short", Cut("short", 10))
	assert.Equal(t, "abc…", Cut("abcdef", 3))
	got := Cut("ошибка базы", 5) // "ош" is 4 bytes; the 5th starts "и"'s second byte
	assert.True(t, utf8.ValidString(got), got)
	assert.Equal(t, "ош…", got)
}

func TestCausePicksTheLineThatExplains(t *testing.T) {
	assert.Equal(t, "no output", Cause(nil))
	assert.Equal(t, "panic: runtime error: nil map", Cause([]string{
		"starting manager", "panic: runtime error: nil map", "goroutine 1 [running]:", "/usr/lib/go/src/runtime/error.go:12",
	}))
	assert.Equal(t, `E1203 failed: error: bind: address already in use`, Cause([]string{
		"I1203 starting", `E1203 failed: error: bind: address already in use`, "I1203 shutting down", "\t/src/internal/errors/x.go:3",
	}))
	assert.Equal(t, "fatal: cannot open db", Cause([]string{"ok", "fatal: cannot open db", "bye"}))
	assert.Equal(t, "bye", Cause([]string{"ok", "bye"}))
}
