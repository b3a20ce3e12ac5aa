package deadlinehttp_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIdempotencyKeyValues: a key with a value, and net/http's nil-slice
// marker, make a POST idempotent; an empty or blank value does not.
func TestIdempotencyKeyValues(t *testing.T) {
	cases := []struct {
		name   string
		header http.Header
		want   bool
	}{
		{"value", http.Header{"Idempotency-Key": {"k-1"}}, true},
		{"X- value", http.Header{"X-Idempotency-Key": {"k-1"}}, true},
		{"nil marker", http.Header{"Idempotency-Key": nil}, true},
		{"empty list marker", http.Header{"X-Idempotency-Key": {}}, true},
		{"empty value", http.Header{"Idempotency-Key": {""}}, false},
		{"blank value", http.Header{"Idempotency-Key": {" \t "}}, false},
		{"X- empty value", http.Header{"X-Idempotency-Key": {""}}, false},
		{"empty first value", http.Header{"Idempotency-Key": {"", "k-1"}}, false},
		{"empty key, X- key", http.Header{"Idempotency-Key": {""}, "X-Idempotency-Key": {"k-1"}}, true},
	}
	for _, tc := range cases {
		r := &http.Request{Method: http.MethodPost, Header: tc.header}
		assert.Equal(t, tc.want, deadlinehttp.IsIdempotent(r), tc.name)
	}
}

// TestEmptyIdempotencyKeySentOnce: on loopback, a POST whose
// Idempotency-Key is the empty string is sent once on a 503; the same POST
// with a key is retried.
func TestEmptyIdempotencyKeySentOnce(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int
	}{{"", 1}, {"k-7f3a", 3}} {
		s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodPost, s.URL, strings.NewReader("order=1"))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", tc.key)
		resp, err := client(s, deadlinehttp.WithPolicy(fastPolicy(3))).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, s.all(), tc.want, "key %q", tc.key)
		stop, ok := deadlinehttp.StopOf(resp)
		require.True(t, ok)
		if tc.want == 1 {
			assert.Equal(t, deadline.ReasonNotRetryable, stop.Reason, "key %q", tc.key)
		} else {
			assert.Equal(t, deadline.ReasonExhausted, stop.Reason, "key %q", tc.key)
		}
	}
}
