package deadlinehttp

import (
	"testing"
	"time"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"0", "1", "120", " 3 ", "-1", "+1", "1.5", "", "soon",
		"99999999999999999999", "9223372036", "9223372037",
		"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT",
	} {
		f.Add(s, int64(784111777))
	}
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		now := time.Unix(nowUnix, 0)
		d, ok := ParseRetryAfter(v, now)
		if d < 0 || d > MaxRetryAfter || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", v, d, ok)
		}
		raw, rok := parseRetryAfter(v, now)
		if raw < 0 || ok && (!rok || raw != d) || !ok && rok && raw <= MaxRetryAfter {
			t.Fatalf("parseRetryAfter(%q) = %v, %v; ParseRetryAfter = %v, %v", v, raw, rok, d, ok)
		}
	})
}

func FuzzParseBudget(f *testing.F) {
	for _, s := range []string{"1", "1980", "9999999999", "10000000000", "0", "", "-1", "+5", "1.5", "abc", "0000000042", "5, 6"} {
		f.Add(s, int64(2*time.Second))
	}
	f.Fuzz(func(t *testing.T, v string, maxNs int64) {
		d, ok := ParseBudget(v)
		if ok {
			if d < time.Millisecond || d > MaxBudget {
				t.Fatalf("ParseBudget(%q) = %v out of range", v, d)
			}
			if back, _ := ParseBudget(FormatBudget(d)); back != d {
				t.Fatalf("FormatBudget(%v) = %q does not parse back", d, FormatBudget(d))
			}
		} else if d != 0 {
			t.Fatalf("ParseBudget(%q) = %v, false", v, d)
		}
		// Any duration formats to a value that parses: rounded up to the
		// millisecond, within [1ms, MaxBudget].
		n := time.Duration(maxNs)
		back, bok := ParseBudget(FormatBudget(n))
		switch {
		case !bok:
			t.Fatalf("FormatBudget(%v) = %q does not parse", n, FormatBudget(n))
		case n >= MaxBudget && back != MaxBudget,
			n <= time.Millisecond && back != time.Millisecond,
			n > time.Millisecond && n < MaxBudget && (back < n || back-n >= time.Millisecond):
			t.Fatalf("FormatBudget(%v) = %q", n, FormatBudget(n))
		}
		// The middleware's reading of the header is fuzzed in
		// handler_fuzz_test.go (FuzzHandlerBudgetList).
	})
}
