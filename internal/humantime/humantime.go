// Package humantime writes a duration the way a person reads it on a
// report: "2 min 35 s" rather than Go's "2m35s", "1 h" rather than
// "1h0m0s", in the report's language.
package humantime

import (
	"strconv"
	"strings"
	"time"
)

// units are the words for each unit, per language; English is the fallback.
var units = map[string][4]string{
	"en": {"h", "min", "s", "ms"},
	"ru": {"ч", "мин", "с", "мс"},
}

// Duration writes d in lang ("en" or "ru"; anything else is English) with at
// most two units, the larger first, dropping a zero second unit: 1 h 5 min,
// 2 min 35 s, 42 s. Under ten seconds it keeps a tenth (4.2 s), under one
// second it counts milliseconds (850 ms). A negative duration is written as
// its absolute value with a minus sign.
func Duration(d time.Duration, lang string) string {
	u, ok := units[lang]
	if !ok {
		u = units["en"]
	}
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	decimal := "."
	if lang == "ru" {
		decimal = ","
	}
	switch {
	case d == 0:
		return "0 " + u[2]
	case d < time.Second:
		ms := d.Round(time.Millisecond) / time.Millisecond
		if ms == 0 {
			ms = 1
		}
		if ms == 1000 {
			return sign + "1 " + u[2]
		}
		return sign + strconv.FormatInt(int64(ms), 10) + " " + u[3]
	case d < 10*time.Second:
		tenths := d.Round(100*time.Millisecond) / (100 * time.Millisecond)
		if tenths%10 == 0 {
			return sign + strconv.FormatInt(int64(tenths/10), 10) + " " + u[2]
		}
		s := strconv.FormatFloat(float64(tenths)/10, 'f', 1, 64)
		return sign + strings.Replace(s, ".", decimal, 1) + " " + u[2]
	}
	secs := int64(d.Round(time.Second) / time.Second)
	h, m, s := secs/3600, secs/60%60, secs%60
	switch {
	case h > 0:
		// Hours with minutes rounded: "1 h 5 min"; seconds are noise here.
		mins := (secs + 30) / 60
		return sign + pair(mins/60, u[0], mins%60, u[1])
	case m > 0:
		return sign + pair(m, u[1], s, u[2])
	default:
		return sign + strconv.FormatInt(s, 10) + " " + u[2]
	}
}

// pair writes "a unitA b unitB", leaving out the second part when it is zero.
func pair(a int64, unitA string, b int64, unitB string) string {
	out := strconv.FormatInt(a, 10) + " " + unitA
	if b != 0 {
		out += " " + strconv.FormatInt(b, 10) + " " + unitB
	}
	return out
}
