package userr

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// README.md's "Exit codes" table is what users read; it must match the
// codes the commands return.
func TestREADMEExitCodesMatchTheCode(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(raw), "## Exit codes")
	require.True(t, ok, "README has an Exit codes section")
	type row struct {
		code    int
		meaning string
	}
	var got []row
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 2 {
			continue
		}
		code, err := strconv.Atoi(cells[0])
		if err != nil {
			continue // header and separator
		}
		got = append(got, row{code, cells[1]})
	}
	var want []row
	for _, c := range ExitCodes {
		want = append(want, row{c.Code, c.Meaning})
	}
	assert.Equal(t, want, got, "README's exit-code table and userr.ExitCodes differ: change both")
}
