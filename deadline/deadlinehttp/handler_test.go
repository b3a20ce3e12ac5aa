package deadlinehttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// served is what one request through NewHandler produced.
type served struct {
	called    bool
	budget    time.Duration // deadline.FromContext(...).Budget() in next
	fromStart time.Duration // its End, measured from arrival
	ctxEnd    time.Duration // the context's own deadline, from arrival
	header    []string      // the budget header values next received
	malformed []string      // values reported to WithMalformed
	code      int
	refused   string // the RefusedHeader
	body      string
}

// serve runs one request carrying the given budget header values through
// NewHandler, inside a synctest bubble so durations are exact. parent, if
// not nil, is the request's base context.
func serve(t *testing.T, parent context.Context, header []string, opts ...deadlinehttp.HandlerOption) served {
	t.Helper()
	var s served
	synctest.Test(t, func(t *testing.T) {
		arrived := time.Now()
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.called = true
			d, ok := deadline.FromContext(r.Context())
			require.True(t, ok)
			s.budget, s.fromStart = d.Budget(), d.End().Sub(arrived)
			end, ok := r.Context().Deadline()
			require.True(t, ok, "the context has a deadline")
			s.ctxEnd = end.Sub(arrived)
			s.header = r.Header.Values(deadlinehttp.DefaultHeader)
		})
		opts = append(opts, deadlinehttp.WithMalformed(func(r *http.Request, v string) { s.malformed = append(s.malformed, v) }))
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if parent != nil {
			ctx, cancel := context.WithTimeout(parent, time.Second) // an outer layer's earlier deadline
			defer cancel()
			r = r.WithContext(ctx)
		}
		for _, v := range header {
			r.Header.Add(deadlinehttp.DefaultHeader, v)
		}
		rec := httptest.NewRecorder()
		deadlinehttp.NewHandler(next, opts...).ServeHTTP(rec, r)
		s.code, s.refused, s.body = rec.Code, rec.Header().Get(deadlinehttp.RefusedHeader), rec.Body.String()
	})
	return s
}

func TestHandlerBudget(t *testing.T) {
	max := deadlinehttp.WithMaxBudget(2 * time.Second)
	cases := []struct {
		name   string
		header []string
		opts   []deadlinehttp.HandlerOption
		want   time.Duration
	}{
		{"within the maximum", []string{"1500"}, nil, 1500 * time.Millisecond},
		{"clamped to the maximum", []string{"999999"}, nil, 2 * time.Second},
		{"ten digits clamped", []string{"9999999999"}, nil, 2 * time.Second},
		{"no header gets the maximum", nil, nil, 2 * time.Second},
		{"default maximum", []string{"99999999"}, []deadlinehttp.HandlerOption{deadlinehttp.WithMaxBudget(deadlinehttp.DefaultMaxBudget)}, deadlinehttp.DefaultMaxBudget},
		{"leading zeros", []string{"0000000042"}, nil, 42 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, nil, tc.header, append([]deadlinehttp.HandlerOption{max}, tc.opts...)...)
			require.True(t, s.called)
			assert.Equal(t, http.StatusOK, s.code)
			assert.Equal(t, tc.want, s.budget)
			assert.Equal(t, tc.want, s.fromStart, "the deadline starts on arrival")
			assert.Equal(t, tc.want, s.ctxEnd, "the context ends at the deadline")
			assert.Empty(t, s.malformed)
		})
	}
}

// TestHandlerMalformedIgnored: a malformed header is reported, ignored, and
// the request gets the maximum.
func TestHandlerMalformedIgnored(t *testing.T) {
	cases := []struct {
		header []string
		report string
	}{
		{[]string{""}, ""},
		{[]string{"abc"}, "abc"},
		{[]string{"-5"}, "-5"},
		{[]string{"+5"}, "+5"},
		{[]string{"1.5"}, "1.5"},
		{[]string{"5ms"}, "5ms"},
		{[]string{" 5"}, " 5"},
		{[]string{"0"}, "0"},
		{[]string{"12345678901"}, "12345678901"},
		{[]string{"99999999999999999999999999"}, "99999999999999999999999999"},
		{[]string{"5", "6"}, "5, 6"},
		{[]string{"5,6"}, "5,6"},
	}
	for _, tc := range cases {
		t.Run(tc.report, func(t *testing.T) {
			s := serve(t, nil, tc.header, deadlinehttp.WithMaxBudget(3*time.Second))
			require.True(t, s.called)
			assert.Equal(t, 3*time.Second, s.budget)
			assert.Equal(t, []string{tc.report}, s.malformed)
		})
	}
}

// TestHandlerFloorRefuses: a budget at or below the floor is answered 504
// with RefusedHeader, and next is not called.
func TestHandlerFloorRefuses(t *testing.T) {
	floor := deadlinehttp.WithFloor(20 * time.Millisecond)
	s := serve(t, nil, []string{"5"}, floor)
	assert.False(t, s.called)
	assert.Equal(t, http.StatusGatewayTimeout, s.code)
	assert.Equal(t, "budget-ms=5, floor-ms=20", s.refused)
	assert.Contains(t, s.body, "5ms is at or below this server's 20ms floor")

	s = serve(t, nil, []string{"20"}, floor)
	assert.False(t, s.called, "at the floor is refused")
	assert.Equal(t, "budget-ms=20, floor-ms=20", s.refused)

	s = serve(t, nil, []string{"21"}, floor)
	assert.True(t, s.called)
	assert.Equal(t, 21*time.Millisecond, s.budget)
	assert.Empty(t, s.refused)

	// The floor applies after the clamp.
	s = serve(t, nil, []string{"5000"}, floor, deadlinehttp.WithMaxBudget(15*time.Millisecond))
	assert.False(t, s.called)
	assert.Equal(t, "budget-ms=15, floor-ms=20", s.refused)
}

// TestHandlerStrip: at a trust edge the header is removed and ignored.
func TestHandlerStrip(t *testing.T) {
	s := serve(t, nil, []string{"100"}, deadlinehttp.WithStripHeader(), deadlinehttp.WithMaxBudget(4*time.Second))
	require.True(t, s.called)
	assert.Empty(t, s.header, "next does not see the header")
	assert.Equal(t, 4*time.Second, s.budget)
	assert.Empty(t, s.malformed)

	s = serve(t, nil, []string{"junk"}, deadlinehttp.WithStripHeader())
	assert.Empty(t, s.malformed, "a stripped header is not parsed")
}

// TestHandlerKeepsEarlierOuterDeadline: an outer deadline that ends sooner
// than the inbound budget wins.
func TestHandlerKeepsEarlierOuterDeadline(t *testing.T) {
	s := serve(t, context.Background(), []string{"5000"})
	require.True(t, s.called)
	assert.Equal(t, time.Second, s.fromStart)
	assert.Equal(t, time.Second, s.ctxEnd)
}

// TestHandlerInboundHeader: WithInboundHeader reads another name.
func TestHandlerInboundHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got time.Duration
		h := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, _ := deadline.FromContext(r.Context())
			got = d.Budget()
		}), deadlinehttp.WithInboundHeader("X-Budget"))
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Budget", "250")
		r.Header.Set(deadlinehttp.DefaultHeader, "100")
		h.ServeHTTP(httptest.NewRecorder(), r)
		assert.Equal(t, 250*time.Millisecond, got)
	})
}

// TestHandlerInvalidOptions: a misconfigured middleware answers 500 naming
// the option and never calls next.
func TestHandlerInvalidOptions(t *testing.T) {
	cases := []struct {
		opt  deadlinehttp.HandlerOption
		want string
	}{
		{deadlinehttp.WithMaxBudget(0), "deadlinehttp.WithMaxBudget 0s: must be > 0"},
		{deadlinehttp.WithFloor(-time.Millisecond), "deadlinehttp.WithFloor -1ms: must be >= 0"},
		{deadlinehttp.WithInboundHeader(""), "deadlinehttp.WithInboundHeader"},
		{deadlinehttp.WithInboundHeader("a b"), "deadlinehttp.WithInboundHeader a b"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			called := false
			h := deadlinehttp.NewHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }), tc.opt)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			assert.False(t, called)
			assert.Equal(t, http.StatusInternalServerError, rec.Code)
			body, _ := io.ReadAll(rec.Body)
			assert.Contains(t, string(body), tc.want)
		})
	}
	rec := httptest.NewRecorder()
	deadlinehttp.NewHandler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
}
