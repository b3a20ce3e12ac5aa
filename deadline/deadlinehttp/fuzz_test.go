package deadlinehttp

import (
	"math"
	"math/big"
	"net/http"
	"regexp"
	"strings"
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

// msValue is the syntax ParseRetryAfterMs accepts, written independently.
var msValue = regexp.MustCompile(`^[ \t]*[0-9]+(\.[0-9]+)?[ \t]*$`)

func FuzzParseRetryAfterMs(f *testing.F) {
	for _, s := range []string{
		"0", "20", "1500", " 20\t", "20.5", "1.0000001", "0.00000000009", "86400000", "86400001",
		"9223372036854", "9223372036854.775807", "9223372036854.775808", "99999999999999999999",
		"", "-5", "+5", "-0", "1e3", "5ms", "1.", ".5", "1.5.5", "5, 6", "NaN", "٣",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfterMs(v)
		if d < 0 || d > MaxRetryAfter || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfterMs(%q) = %v, %v", v, d, ok)
		}
		raw, rok := parseRetryAfterMs(v)
		if rok != msValue.MatchString(v) {
			t.Fatalf("parseRetryAfterMs(%q) ok = %v, want %v", v, rok, !rok)
		}
		if !rok {
			if raw != 0 || ok {
				t.Fatalf("parseRetryAfterMs(%q) = %v, %v; ParseRetryAfterMs = %v, %v", v, raw, rok, d, ok)
			}
			return
		}
		// The exact value, rounded up to the nanosecond, saturated.
		r, _ := new(big.Rat).SetString(strings.Trim(v, " \t"))
		r.Mul(r, big.NewRat(int64(time.Millisecond), 1))
		ns := new(big.Int).Quo(r.Num(), r.Denom())
		if !r.IsInt() {
			ns.Add(ns, big.NewInt(1))
		}
		want := time.Duration(math.MaxInt64)
		if ns.IsInt64() {
			want = time.Duration(ns.Int64())
		}
		if raw != want {
			t.Fatalf("parseRetryAfterMs(%q) = %v, want %v", v, raw, want)
		}
		if ok != (raw <= MaxRetryAfter) || ok && d != raw {
			t.Fatalf("ParseRetryAfterMs(%q) = %v, %v; raw %v", v, d, ok, raw)
		}
	})
}

func FuzzParseShouldRetry(f *testing.F) {
	for _, s := range []string{"true", "false", "TRUE", " False\t", "", "1", "yes", "true, false", `"true"`, "tru\u212Ae", "falſe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		retry, ok := ParseShouldRetry(v)
		lower := strings.Map(func(r rune) rune { // ASCII only
			if r >= 'A' && r <= 'Z' {
				return r + 'a' - 'A'
			}
			return r
		}, strings.Trim(v, " \t"))
		wantTrue, wantFalse := lower == "true", lower == "false"
		if ok != (wantTrue || wantFalse) || retry != wantTrue {
			t.Fatalf("ParseShouldRetry(%q) = %v, %v", v, retry, ok)
		}
		h := http.Header{ShouldRetryHeader: {v}}
		switch a := shouldRetry(h); {
		case !ok && a != adviceNone, ok && retry && a != adviceRetry, ok && !retry && a != adviceNoRetry:
			t.Fatalf("shouldRetry(%q) = %v", v, a)
		}
		h.Add(ShouldRetryHeader, v)
		if a := shouldRetry(h); a != adviceNone {
			t.Fatalf("shouldRetry(two lines %q) = %v, want none", v, a)
		}
	})
}

// FuzzServerDelay: the delay read from a response is the first valid one
// of retry-after-ms (sent once), x-ms-retry-after-ms (sent once) and
// Retry-After, never negative.
func FuzzServerDelay(f *testing.F) {
	f.Add("1500", "700", "3", false, int64(784111777))
	f.Add("soon", "700", "3", false, int64(0))
	f.Add("100", "", "Sun, 06 Nov 1994 08:49:37 GMT", true, int64(784111777))
	f.Add("-5", "1e3", "", false, int64(0))
	f.Add("", "", "99999999999999999999", false, int64(0))
	f.Fuzz(func(t *testing.T, ms, azure, ra string, twice bool, nowUnix int64) {
		now := time.Unix(nowUnix, 0)
		h := http.Header{}
		if ms != "" {
			h.Add(RetryAfterMsHeader, ms)
			if twice {
				h.Add(RetryAfterMsHeader, ms)
			}
		}
		if azure != "" {
			h.Add(AzureRetryAfterMsHeader, azure)
		}
		if ra != "" {
			h.Add("Retry-After", ra)
		}
		d, ok := serverDelay(h, now)
		msD, msOK := parseRetryAfterMs(ms)
		azD, azOK := parseRetryAfterMs(azure)
		raD, raOK := parseRetryAfter(ra, now)
		var want time.Duration
		var wantOK bool
		switch {
		case ms != "" && !twice && msOK:
			want, wantOK = msD, true
		case azure != "" && azOK:
			want, wantOK = azD, true
		case ra != "" && raOK:
			want, wantOK = raD, true
		}
		if d < 0 || d != want || ok != wantOK {
			t.Fatalf("serverDelay(%q, %q, %q, twice %v) = %v, %v; want %v, %v", ms, azure, ra, twice, d, ok, want, wantOK)
		}
	})
}
