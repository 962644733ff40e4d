package iostreams

import "testing"

func TestColorWanted(t *testing.T) {
	for _, c := range []struct {
		name string
		tty  bool
		env  map[string]string
		want bool
	}{
		{"terminal", true, nil, true},
		{"pipe", false, nil, false},
		{"dumb terminal", true, map[string]string{"TERM": "dumb"}, false},
		{"NO_COLOR on a terminal", true, map[string]string{"NO_COLOR": "1"}, false},
		{"FORCE_COLOR in a CI log", false, map[string]string{"FORCE_COLOR": "1"}, true},
		{"FORCE_COLOR=0", false, map[string]string{"FORCE_COLOR": "0"}, false},
		{"NO_COLOR beats FORCE_COLOR", false, map[string]string{"FORCE_COLOR": "1", "NO_COLOR": "1"}, false},
	} {
		got := colorWanted(c.tty, func(k string) string { return c.env[k] })
		if got != c.want {
			t.Errorf("%s: colour %v, want %v", c.name, got, c.want)
		}
	}
}
