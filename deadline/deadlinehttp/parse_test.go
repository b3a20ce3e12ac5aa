package deadlinehttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
)

func TestFormatBudget(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1"},
		{0, "1"},
		{time.Nanosecond, "1"},
		{time.Millisecond, "1"},
		{time.Millisecond + time.Nanosecond, "2"},
		{1980 * time.Millisecond, "1980"},
		{999500 * time.Microsecond, "1000"},
		{deadlinehttp.MaxBudget - time.Nanosecond, "9999999999"},
		{deadlinehttp.MaxBudget, "9999999999"},
		{1<<63 - 1, "9999999999"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, deadlinehttp.FormatBudget(tc.d), "FormatBudget(%v)", tc.d)
	}
}

func TestParseBudget(t *testing.T) {
	cases := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"1", time.Millisecond, true},
		{"1980", 1980 * time.Millisecond, true},
		{"0000000001", time.Millisecond, true},
		{"9999999999", deadlinehttp.MaxBudget, true},
		{"", 0, false},
		{"0", 0, false},
		{"0000000000", 0, false},
		{"10000000000", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5", 0, false},
		{"1e3", 0, false},
		{"5ms", 0, false},
		{" 5", 0, false},
		{"5 ", 0, false},
		{"٣", 0, false}, // a non-ASCII digit
	}
	for _, tc := range cases {
		d, ok := deadlinehttp.ParseBudget(tc.v)
		assert.Equal(t, tc.ok, ok, "ParseBudget(%q)", tc.v)
		assert.Equal(t, tc.want, d, "ParseBudget(%q)", tc.v)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"1", time.Second, true},
		{" 120\t", 2 * time.Minute, true},
		{"007", 7 * time.Second, true},
		{"86400", deadlinehttp.MaxRetryAfter, true},
		{"86401", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"  ", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5", 0, false},
		{"1s", 0, false},
		{"soon", 0, false},
		{"Sun, 01 Mar 2026 12:00:30 GMT", 30 * time.Second, true}, // IMF-fixdate
		{"Sunday, 01-Mar-26 12:01:00 GMT", time.Minute, true},     // RFC 850
		{"Sun Mar  1 12:00:05 2026", 5 * time.Second, true},       // asctime
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, true},                // in the past: now
		{"Mon, 02 Mar 2026 12:00:01 GMT", 0, false},               // beyond the cap
		{"Fri, 31 Dec 9999 23:59:59 GMT", 0, false},               // absurd
		{"Sun, 01 Mar 2026 12:00:30 +0100", 0, false},             // not GMT
		{"Sun, 01 Mar 2026 25:00:30 GMT", 0, false},               // no such hour
	}
	for _, tc := range cases {
		d, ok := deadlinehttp.ParseRetryAfter(tc.v, now)
		assert.Equal(t, tc.ok, ok, "ParseRetryAfter(%q)", tc.v)
		assert.Equal(t, tc.want, d, "ParseRetryAfter(%q)", tc.v)
	}
}

func TestIsIdempotent(t *testing.T) {
	cases := []struct {
		method string
		header http.Header
		want   bool
	}{
		{"", nil, true},
		{http.MethodGet, nil, true},
		{http.MethodHead, nil, true},
		{http.MethodOptions, nil, true},
		{http.MethodTrace, nil, true},
		{http.MethodPut, nil, true},
		{http.MethodDelete, nil, true},
		{http.MethodPost, nil, false},
		{http.MethodPatch, nil, false},
		{http.MethodConnect, nil, false},
		{"get", nil, false}, // methods are case-sensitive
		{http.MethodPost, http.Header{"Idempotency-Key": {"k"}}, true},
		{http.MethodPatch, http.Header{"X-Idempotency-Key": {"k"}}, true},
		{http.MethodPost, http.Header{"Idempotency-Key": nil}, true}, // net/http: marked, not sent
		{http.MethodPost, http.Header{"Idempotency-Token": {"k"}}, false},
	}
	for _, tc := range cases {
		r := &http.Request{Method: tc.method, Header: tc.header}
		assert.Equal(t, tc.want, deadlinehttp.IsIdempotent(r), "%q %v", tc.method, tc.header)
	}
}
