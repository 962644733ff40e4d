package checks

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
)

type patternSpec struct {
	Accepts []string `json:"accepts"`
	Rejects []string `json:"rejects"`
	// Like is the lab text's own pattern: the field's must sort every
	// string of a space generated from both patterns the same way (see
	// patternDifference), so any equivalent expression passes (\d for
	// [0-9], groups written otherwise) and any other fails with the
	// shortest string they disagree on.
	Like string `json:"like,omitempty"`
}

func (p *patternSpec) String() string {
	return fmt.Sprintf("a pattern accepting %s and rejecting %s", strings.Join(p.Accepts, ", "), strings.Join(p.Rejects, ", "))
}

// judge says what is wrong with a schema's pattern ("" when nothing). The
// API server evaluates patterns as ECMA-262 regular expressions; the
// patterns a lab asks for are in the part RE2 shares with them.
func (p *patternSpec) judge(pattern string) string {
	if pattern == "" {
		return "no pattern"
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Sprintf("pattern `%s` does not compile: %v", pattern, err)
	}
	var wrong []string
	for _, v := range p.Accepts {
		if !re.MatchString(v) {
			wrong = append(wrong, fmt.Sprintf("rejects %q", v))
		}
	}
	for _, v := range p.Rejects {
		if re.MatchString(v) {
			wrong = append(wrong, fmt.Sprintf("accepts %q", v))
		}
	}
	if len(wrong) == 0 && p.Like != "" {
		seeds := append(slices.Clone(p.Accepts), p.Rejects...)
		if v, theirs, ok := patternDifference(re, regexp.MustCompile(p.Like), seeds, pattern, p.Like); ok {
			verdict := "rejects"
			if theirs {
				verdict = "accepts"
			}
			wrong = append(wrong, fmt.Sprintf("%s %q, unlike the lab's `%s`", verdict, v, p.Like))
		}
	}
	if len(wrong) > 0 {
		return fmt.Sprintf("pattern `%s` %s", pattern, strings.Join(wrong, ", "))
	}
	return ""
}

// patternDifference looks for a string that re and like sort
// differently, and says whether re accepts it. Regular-expression
// equivalence is decided here by exhaustion over a space that reaches
// every way the two differ in practice: first every string of up to four
// characters (the shortest difference first), then every string one or
// two edits (a character inserted, replaced or deleted) away from the
// lab's examples (seeds), over an alphabet of the characters both
// patterns name (literals, the ends of classes), those letters in the
// other case, digits, and characters neither names (x . - and a space).
// A missing anchor, a misplaced alternation, an extra or a missing unit,
// a bound on the length, all show.
func patternDifference(re, like *regexp.Regexp, seeds []string, patterns ...string) (string, bool, bool) {
	alphabet := patternAlphabet(patterns...)
	differ := func(v string) (bool, bool) {
		a, b := re.MatchString(v), like.MatchString(v)
		return a, a != b
	}
	var buf []rune
	var walk func(n int) (string, bool, bool)
	walk = func(n int) (string, bool, bool) {
		if len(buf) == n {
			v := string(buf)
			a, d := differ(v)
			return v, a, d
		}
		for _, r := range alphabet {
			buf = append(buf, r)
			v, a, found := walk(n)
			buf = buf[:len(buf)-1]
			if found {
				return v, a, true
			}
		}
		return "", false, false
	}
	for n := 0; n <= 4; n++ {
		if v, a, found := walk(n); found {
			return v, a, true
		}
	}
	edits := func(s string) []string {
		rs := []rune(s)
		var out []string
		for i := 0; i <= len(rs); i++ {
			if i < len(rs) {
				out = append(out, string(slices.Delete(slices.Clone(rs), i, i+1)))
			}
			for _, r := range alphabet {
				out = append(out, string(slices.Insert(slices.Clone(rs), i, r)))
				if i < len(rs) {
					c := slices.Clone(rs)
					c[i] = r
					out = append(out, string(c))
				}
			}
		}
		return out
	}
	for _, seed := range seeds {
		for _, once := range edits(seed) {
			if a, d := differ(once); d {
				return once, a, true
			}
		}
	}
	for _, seed := range seeds {
		for _, once := range edits(seed) {
			for _, twice := range edits(once) {
				if a, d := differ(twice); d {
					return twice, a, true
				}
			}
		}
	}
	return "", false, false
}

// patternAlphabet is the characters patterns name, the letters among
// them in the other case, three digits and four strangers, each once.
func patternAlphabet(patterns ...string) []rune {
	seen := map[rune]bool{}
	var out []rune
	add := func(rs ...rune) {
		for _, r := range rs {
			if !seen[r] && unicode.IsPrint(r) {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	add('0', '5', '9', 'x', '.', '-', ' ')
	var visit func(re *syntax.Regexp)
	visit = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			add(re.Rune...)
		case syntax.OpCharClass:
			for i := 0; i+1 < len(re.Rune); i += 2 {
				lo, hi := re.Rune[i], re.Rune[i+1]
				if hi-lo > 255 { // a negated class: its ends are not characters anyone types
					continue
				}
				add(lo, hi)
			}
		}
		for _, sub := range re.Sub {
			visit(sub)
		}
	}
	for _, p := range patterns {
		if re, err := syntax.Parse(p, syntax.Perl); err == nil {
			visit(re)
		}
	}
	for _, r := range slices.Clone(out) {
		add(unicode.SimpleFold(r))
	}
	if len(out) > 24 { // keep the space (24^4 strings) quick
		out = out[:24]
	}
	return out
}
