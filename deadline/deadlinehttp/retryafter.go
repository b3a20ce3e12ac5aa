package deadlinehttp

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// MaxRetryAfter is the largest delay [ParseRetryAfter] accepts: 24 hours.
// A longer, well-formed value is refused as absurd by the parser; the
// [Transport] does not fall back to its own shorter backoff for such a
// value (that would retry sooner than the server asked) but stops the call
// with [deadline.ReasonRetryAfterTooLong] whenever the value exceeds what is
// left of the budget.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter parses a Retry-After field value (RFC 9110 §10.2.3) into
// the delay it asks for, measured from now.
//
// Both forms are accepted, with surrounding spaces or tabs: delay-seconds
// (one or more ASCII digits, no sign, no fraction) and HTTP-date (the
// IMF-fixdate form and the obsolete RFC 850 and asctime forms, as
// [http.ParseTime] reads them). An HTTP-date at or before now means "retry
// now" and gives 0.
//
// It reports false, and a zero delay, for an empty or malformed value, a
// negative number, a number too large for a time.Duration, and any delay
// longer than [MaxRetryAfter]. A true result is always in
// [0, MaxRetryAfter].
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	d, ok := parseRetryAfter(value, now)
	if !ok || d > MaxRetryAfter {
		return 0, false
	}
	return d, true
}

// parseRetryAfter is ParseRetryAfter without the MaxRetryAfter cap: a
// well-formed value too large for a time.Duration saturates at the largest
// one, so that the transport can tell "absurdly long" (give up) from
// "garbage" (ignore).
func parseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return 0, false
	}
	if c := v[0]; c >= '0' && c <= '9' {
		return parseSeconds(v)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true // Sub saturates; never negative
}

// parseSeconds reads delay-seconds, saturating at the largest Duration.
func parseSeconds(v string) (time.Duration, bool) {
	const maxSeconds = int64(math.MaxInt64 / int64(time.Second))
	var s int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if s <= maxSeconds {
			s = s*10 + int64(c-'0')
		}
	}
	if s > maxSeconds {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(s) * time.Second, true
}
