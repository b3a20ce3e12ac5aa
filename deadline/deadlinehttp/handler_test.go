package deadlinehttp_test

import (
	"context"
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
		h, err := deadlinehttp.NewHandler(next, opts...)
		require.NoError(t, err)
		h.ServeHTTP(rec, r)
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
	assert.Equal(t, "deadline budget too small: budget-ms=5, floor-ms=20\n", s.body, "the body repeats the public header, nothing else")

	s = serve(t, nil, []string{"20"}, floor)
	assert.False(t, s.called, "at the floor is refused")
	assert.Equal(t, "budget-ms=20, floor-ms=20", s.refused)

	s = serve(t, nil, []string{"21"}, floor)
	assert.True(t, s.called)
	assert.Equal(t, 21*time.Millisecond, s.budget)
	assert.Empty(t, s.refused)

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
		h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, _ := deadline.FromContext(r.Context())
			got = d.Budget()
		}), deadlinehttp.WithInboundHeader("X-Budget"))
		require.NoError(t, err)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Budget", "250")
		r.Header.Set(deadlinehttp.DefaultHeader, "100")
		h.ServeHTTP(httptest.NewRecorder(), r)
		assert.Equal(t, 250*time.Millisecond, got)
	})
}

// mustHandler is NewHandler's handler, for tests whose options are valid.
func mustHandler(h http.Handler, err error) http.Handler {
	if err != nil {
		panic(err)
	}
	return h
}

// TestNewHandlerInvalid: a misconfigured middleware is an error at
// construction, naming the option; there is no handler to answer requests.
func TestNewHandlerInvalid(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	cases := []struct {
		next http.Handler
		opts []deadlinehttp.HandlerOption
		want string
	}{
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithMaxBudget(0)}, "deadline: invalid deadlinehttp.WithMaxBudget 0s: must be > 0"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithMaxBudget(-time.Second)}, "deadline: invalid deadlinehttp.WithMaxBudget -1s: must be > 0"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithFloor(-time.Millisecond)}, "deadline: invalid deadlinehttp.WithFloor -1ms: must be >= 0"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithInboundHeader("")}, "deadline: invalid deadlinehttp.WithInboundHeader : must be an HTTP token"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithInboundHeader("a b")}, "deadline: invalid deadlinehttp.WithInboundHeader a b: must be an HTTP token"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithFloor(time.Second), deadlinehttp.WithMaxBudget(time.Second)},
			"deadline: invalid deadlinehttp.WithFloor 1s: must be below the maximum budget 1s (WithMaxBudget), or every request is refused"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithMaxBudget(time.Second), deadlinehttp.WithFloor(2 * time.Second)},
			"deadline: invalid deadlinehttp.WithFloor 2s: must be below the maximum budget 1s (WithMaxBudget), or every request is refused"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithFloor(time.Minute)},
			"deadline: invalid deadlinehttp.WithFloor 1m0s: must be below the maximum budget 30s (WithMaxBudget), or every request is refused"},
		{nil, nil, "deadline: invalid deadlinehttp.NewHandler next <nil>: must be a non-nil http.Handler"},
		{nil, []deadlinehttp.HandlerOption{deadlinehttp.WithFloor(-1)}, "deadlinehttp.NewHandler next"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			h, err := deadlinehttp.NewHandler(tc.next, tc.opts...)
			require.Error(t, err)
			assert.Nil(t, h)
			assert.Contains(t, err.Error(), tc.want)
			assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
			var pe *deadline.PolicyError
			require.ErrorAs(t, err, &pe)
		})
	}

	h, err := deadlinehttp.NewHandler(ok, nil, deadlinehttp.WithFloor(time.Second-1), nil)
	require.NoError(t, err, "nil options are ignored; a floor just below the maximum is valid")
	assert.NotNil(t, h)
}
