package humantime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDurationReadsAsAPersonWouldWriteIt(t *testing.T) {
	for _, c := range []struct {
		d      time.Duration
		en, ru string
	}{
		{0, "0 s", "0 с"},
		{400 * time.Microsecond, "1 ms", "1 мс"},
		{850 * time.Millisecond, "850 ms", "850 мс"},
		{999600 * time.Microsecond, "1 s", "1 с"},
		{4200 * time.Millisecond, "4.2 s", "4,2 с"},
		{3 * time.Second, "3 s", "3 с"},
		{9970 * time.Millisecond, "10 s", "10 с"},
		{42 * time.Second, "42 s", "42 с"},
		{59600 * time.Millisecond, "1 min", "1 мин"},
		{155 * time.Second, "2 min 35 s", "2 мин 35 с"},
		{10 * time.Minute, "10 min", "10 мин"},
		{time.Hour, "1 h", "1 ч"},
		{time.Hour + 5*time.Minute + 10*time.Second, "1 h 5 min", "1 ч 5 мин"},
		{2*time.Hour - 10*time.Second, "2 h", "2 ч"},
		{-90 * time.Second, "-1 min 30 s", "-1 мин 30 с"},
	} {
		assert.Equal(t, c.en, Duration(c.d, "en"), "%v in English", c.d)
		assert.Equal(t, c.ru, Duration(c.d, "ru"), "%v in Russian", c.d)
	}
	assert.Equal(t, "2 min 35 s", Duration(155*time.Second, "de"), "an unknown language falls back to English")
}
