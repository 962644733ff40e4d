package iostreams

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConfirm(t *testing.T) {
	for answer, want := range map[string]bool{"y\n": true, "YES\n": true, "n\n": false, "\n": false, "": false, "maybe\n": false} {
		s, _, errOut := Test(true)
		s.In = strings.NewReader(answer)
		assert.Equal(t, want, s.Confirm("Recreate it?"), "%q", answer)
		assert.Equal(t, "Recreate it? [y/N] ", errOut.String())
	}
}

func TestCanPromptOnlyOnATerminal(t *testing.T) {
	s, _, _ := Test(true)
	assert.True(t, s.CanPrompt())
	s, _, _ = Test(false)
	assert.False(t, s.CanPrompt())
}
