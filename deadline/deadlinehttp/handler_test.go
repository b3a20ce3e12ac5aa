package deadlinehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// arrival is one request as it reaches the middleware.
type arrival struct {
	header []string       // the budget header's lines
	ctx    *time.Duration // the request context's own deadline, from arrival (an outer layer)
	stored *time.Duration // a deadline.Deadline of this budget stored in the context
}

// served is what one request through NewHandler produced.
type served struct {
	called     bool
	budget     time.Duration // deadline.FromContext(...).Budget() in next
	fromStart  time.Duration // its End, measured from arrival
	ctxEnd     time.Duration // the context's own deadline, from arrival
	header     []string      // the budget header values next received
	malformed  []string      // values reported to WithMalformed
	admissions []deadlinehttp.Admission
	code       int
	refused    string // the RefusedHeader
	body       string
}

// mustHandler is NewHandler's handler, for tests whose options are valid.
func mustHandler(h http.Handler, err error) http.Handler {
	if err != nil {
		panic(err)
	}
	return h
}

func ms(n int) *time.Duration { d := time.Duration(n) * time.Millisecond; return &d }

// serve runs one request through NewHandler, inside a synctest bubble so
// durations are exact.
func serve(t *testing.T, in arrival, opts ...deadlinehttp.HandlerOption) served {
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
		opts = append(opts,
			deadlinehttp.WithMalformed(func(r *http.Request, v string) { s.malformed = append(s.malformed, v) }),
			deadlinehttp.WithAdmission(func(r *http.Request, a deadlinehttp.Admission) { s.admissions = append(s.admissions, a) }),
		)
		h, err := deadlinehttp.NewHandler(next, opts...)
		require.NoError(t, err)
		ctx := context.Background()
		if in.ctx != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *in.ctx)
			defer cancel()
		}
		if in.stored != nil {
			ctx = deadline.NewContext(ctx, deadline.New(*in.stored))
		}
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		for _, v := range in.header {
			r.Header.Add(deadlinehttp.DefaultHeader, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		s.code, s.refused, s.body = rec.Code, rec.Header().Get(deadlinehttp.RefusedHeader), rec.Body.String()
		require.Len(t, s.admissions, 1, "WithAdmission is called once per request")
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
		{"at the maximum", []string{"2000"}, nil, 2 * time.Second},
		// A list, on one line or several: the smallest member counts.
		{"a list takes the smallest", []string{"50, 20"}, nil, 20 * time.Millisecond},
		{"a list without spaces", []string{"50,20,30"}, nil, 20 * time.Millisecond},
		{"two lines take the smallest", []string{"50", "20"}, nil, 20 * time.Millisecond},
		{"a duplicated line", []string{"1", "1"}, nil, time.Millisecond},
		{"a line appended by a proxy cannot raise it", []string{"20", "60000"}, nil, 20 * time.Millisecond},
		{"lines and lists", []string{"70, 90", "80", "60,75"}, nil, 60 * time.Millisecond},
		{"spaces and tabs around members", []string{" \t20 \t"}, nil, 20 * time.Millisecond},
		{"empty members are ignored", []string{",20,, ,"}, nil, 20 * time.Millisecond},
		{"a list clamped", []string{"5000, 9000"}, nil, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, arrival{header: tc.header}, append([]deadlinehttp.HandlerOption{max}, tc.opts...)...)
			require.True(t, s.called)
			assert.Equal(t, http.StatusOK, s.code)
			assert.Equal(t, tc.want, s.budget)
			assert.Equal(t, tc.want, s.fromStart, "the deadline starts on arrival")
			assert.Equal(t, tc.want, s.ctxEnd, "the context ends at the deadline")
			assert.Empty(t, s.malformed)
			assert.Equal(t, tc.header, s.header, "next sees the header as it arrived")
		})
	}
}

// TestHandlerMalformed: an invalid member is reported and ignored; the valid
// members still count, and without one the request gets the maximum.
func TestHandlerMalformed(t *testing.T) {
	cases := []struct {
		header []string
		want   time.Duration
		report string
	}{
		{[]string{""}, 3 * time.Second, ""},
		{[]string{" , "}, 3 * time.Second, " , "},
		{[]string{"abc"}, 3 * time.Second, "abc"},
		{[]string{"-5"}, 3 * time.Second, "-5"},
		{[]string{"+5"}, 3 * time.Second, "+5"},
		{[]string{"1.5"}, 3 * time.Second, "1.5"},
		{[]string{"5ms"}, 3 * time.Second, "5ms"},
		{[]string{"5 6"}, 3 * time.Second, "5 6"},
		{[]string{"1e3"}, 3 * time.Second, "1e3"},
		{[]string{"٣"}, 3 * time.Second, "٣"},
		{[]string{"12345678901"}, 3 * time.Second, "12345678901"},
		{[]string{"99999999999999999999999999"}, 3 * time.Second, "99999999999999999999999999"},
		{[]string{"5, abc"}, 5 * time.Millisecond, "5, abc"},
		{[]string{"abc", "7"}, 7 * time.Millisecond, "abc, 7"},
		{[]string{"900", "", "12345678901"}, 900 * time.Millisecond, "900, , 12345678901"},
	}
	for _, tc := range cases {
		t.Run(tc.report, func(t *testing.T) {
			s := serve(t, arrival{header: tc.header}, deadlinehttp.WithMaxBudget(3*time.Second))
			require.True(t, s.called)
			assert.Equal(t, tc.want, s.budget)
			assert.Equal(t, []string{tc.report}, s.malformed, "reported once")
			assert.True(t, s.admissions[0].HeaderMalformed)
		})
	}
}

// TestHandlerMalformedPrefix: WithMalformed receives at most
// MaxMalformedValue bytes, never a whole huge header, and never half a
// UTF-8 sequence.
func TestHandlerMalformedPrefix(t *testing.T) {
	huge := strings.Repeat("x", 64<<10)
	accents := "a" + strings.Repeat("é", 40) // the 64-byte cut falls inside an é
	cases := []struct {
		name   string
		header []string
		report string
	}{
		{"64 bytes whole", []string{strings.Repeat("y", 64)}, strings.Repeat("y", 64)},
		{"65 bytes cut", []string{strings.Repeat("y", 65)}, strings.Repeat("y", 64)},
		{"64 KiB cut", []string{huge}, huge[:64]},
		{"many lines cut", []string{"abc", huge, huge}, "abc, " + huge[:59]},
		{"a separator cut", []string{strings.Repeat("z", 63), "1"}, strings.Repeat("z", 63) + ","},
		{"a rune not split", []string{accents}, accents[:63]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, arrival{header: tc.header})
			require.Len(t, s.malformed, 1)
			got := s.malformed[0]
			assert.LessOrEqual(t, len(got), deadlinehttp.MaxMalformedValue)
			assert.True(t, got == tc.report, "reported %d bytes %.80q, want %d bytes %.80q", len(got), got, len(tc.report), tc.report)
		})
	}
}

// TestHandlerZeroIsSpent: an explicit 0 is a budget already spent: refused
// with 504 whatever the floor, never granted the maximum.
func TestHandlerZeroIsSpent(t *testing.T) {
	for _, header := range [][]string{{"0"}, {"0000000000"}, {"50", "0"}, {"0, 90"}, {"0, junk"}} {
		t.Run(strings.Join(header, "|"), func(t *testing.T) {
			s := serve(t, arrival{header: header})
			assert.False(t, s.called)
			assert.Equal(t, http.StatusGatewayTimeout, s.code)
			assert.Equal(t, "budget-ms=0, floor-ms=0", s.refused)
			assert.Equal(t, deadlinehttp.RefusalSpent, s.admissions[0].Refusal)
			assert.True(t, s.admissions[0].HeaderZero())

			s = serve(t, arrival{header: header}, deadlinehttp.WithFloor(20*time.Millisecond))
			assert.False(t, s.called)
			assert.Equal(t, "budget-ms=0, floor-ms=20", s.refused)
		})
	}
}

// TestHandlerFloorRefuses: a budget at or below the floor is answered 504
// with RefusedHeader and a body that says nothing more, and next is not
// called.
func TestHandlerFloorRefuses(t *testing.T) {
	floor := deadlinehttp.WithFloor(20 * time.Millisecond)
	s := serve(t, arrival{header: []string{"5"}}, floor)
	assert.False(t, s.called)
	assert.Equal(t, http.StatusGatewayTimeout, s.code)
	assert.Equal(t, "budget-ms=5, floor-ms=20", s.refused)
	assert.Equal(t, "deadline budget too small: budget-ms=5, floor-ms=20\n", s.body, "the body repeats the public header, nothing else")

	s = serve(t, arrival{header: []string{"20"}}, floor)
	assert.False(t, s.called, "at the floor is refused")
	assert.Equal(t, "budget-ms=20, floor-ms=20", s.refused)

	s = serve(t, arrival{header: []string{"21"}}, floor)
	assert.True(t, s.called)
	assert.Equal(t, 21*time.Millisecond, s.budget)
	assert.Empty(t, s.refused)

	s = serve(t, arrival{header: []string{"900", "8"}}, floor)
	assert.False(t, s.called, "the smallest line is checked against the floor")
	assert.Equal(t, "budget-ms=8, floor-ms=20", s.refused)
}

// TestHandlerEffectiveDeadline: the budget, and the floor check, use the
// smallest of the header, the maximum and the deadline the request's
// context already has.
func TestHandlerEffectiveDeadline(t *testing.T) {
	floor := deadlinehttp.WithFloor(20 * time.Millisecond)
	cases := []struct {
		name    string
		in      arrival
		called  bool
		want    time.Duration // the context's end, from arrival, when called
		refused string
		limit   deadlinehttp.Limit
	}{
		{"an outer 3ms deadline is below the floor", arrival{header: []string{"500"}, ctx: ms(3)}, false, 0, "budget-ms=3, floor-ms=20", deadlinehttp.LimitContext},
		{"a stored 3ms Deadline is below the floor", arrival{header: []string{"500"}, stored: ms(3)}, false, 0, "budget-ms=3, floor-ms=20", deadlinehttp.LimitContext},
		{"an outer deadline without a header", arrival{ctx: ms(3)}, false, 0, "budget-ms=3, floor-ms=20", deadlinehttp.LimitContext},
		{"an outer deadline already passed", arrival{header: []string{"500"}, ctx: ms(-5)}, false, 0, "budget-ms=0, floor-ms=20", deadlinehttp.LimitContext},
		{"an earlier outer deadline is kept", arrival{header: []string{"5000"}, ctx: ms(1000)}, true, time.Second, "", deadlinehttp.LimitContext},
		{"an earlier stored Deadline is kept", arrival{header: []string{"5000"}, stored: ms(1000)}, true, time.Second, "", deadlinehttp.LimitContext},
		{"a later outer deadline gives way to the header", arrival{header: []string{"500"}, ctx: ms(1000)}, true, 500 * time.Millisecond, "", deadlinehttp.LimitHeader},
		{"a later outer deadline gives way to the maximum", arrival{ctx: ms(9000)}, true, 2 * time.Second, "", deadlinehttp.LimitMax},
		{"a tie goes to the header", arrival{header: []string{"700"}, ctx: ms(700)}, true, 700 * time.Millisecond, "", deadlinehttp.LimitHeader},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, tc.in, floor, deadlinehttp.WithMaxBudget(2*time.Second))
			assert.Equal(t, tc.called, s.called)
			assert.Equal(t, tc.refused, s.refused)
			assert.Equal(t, tc.limit, s.admissions[0].Limit)
			if tc.called {
				assert.Equal(t, tc.want, s.ctxEnd)
				assert.Equal(t, tc.want, s.fromStart, "FromContext in next agrees with the context")
			} else {
				assert.Equal(t, http.StatusGatewayTimeout, s.code)
			}
		})
	}
}

// TestHandlerStrip: at a trust edge the header is ignored, and next gets a
// copy of the request without it; the inbound request is not modified.
func TestHandlerStrip(t *testing.T) {
	s := serve(t, arrival{header: []string{"100"}}, deadlinehttp.WithStripHeader(), deadlinehttp.WithMaxBudget(4*time.Second))
	require.True(t, s.called)
	assert.Empty(t, s.header, "next does not see the header")
	assert.Equal(t, 4*time.Second, s.budget)
	assert.Empty(t, s.malformed)

	s = serve(t, arrival{header: []string{"junk"}}, deadlinehttp.WithStripHeader())
	assert.Empty(t, s.malformed, "a stripped header is not parsed")
	s = serve(t, arrival{header: []string{"0"}}, deadlinehttp.WithStripHeader())
	assert.True(t, s.called, "a stripped 0 is not read")
}

func TestHandlerStripDoesNotModifyTheRequest(t *testing.T) {
	var seen http.Header
	h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header
	}), deadlinehttp.WithStripHeader())
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set(deadlinehttp.DefaultHeader, "100")
	r.Header.Set("X-Other", "kept")
	h.ServeHTTP(httptest.NewRecorder(), r)

	assert.Equal(t, []string{"100"}, r.Header.Values(deadlinehttp.DefaultHeader), "the inbound request keeps its header")
	assert.Empty(t, seen.Values(deadlinehttp.DefaultHeader))
	assert.Equal(t, "kept", seen.Get("X-Other"))
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

// TestNewHandlerInvalid: a misconfigured middleware is an error at
// construction, naming the option; there is no handler to answer requests.
func TestNewHandlerInvalid(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	cases := []struct {
		next http.Handler
		opts []deadlinehttp.HandlerOption
		want string
	}{
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithMaxBudget(0)}, "deadline: invalid WithMaxBudget 0s: must be > 0"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithMaxBudget(-time.Second)}, "deadline: invalid WithMaxBudget -1s: must be > 0"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithFloor(-time.Millisecond)}, "deadline: invalid WithFloor -1ms: must be >= 0"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithInboundHeader("")}, "deadline: invalid deadlinehttp.WithInboundHeader : must be an HTTP token"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithInboundHeader("a b")}, "deadline: invalid deadlinehttp.WithInboundHeader a b: must be an HTTP token"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithFloor(time.Second), deadlinehttp.WithMaxBudget(time.Second)},
			"deadline: invalid WithFloor 1s: must be below the maximum budget 1s (WithMaxBudget), or every call is refused"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithMaxBudget(time.Second), deadlinehttp.WithFloor(2 * time.Second)},
			"deadline: invalid WithFloor 2s: must be below the maximum budget 1s (WithMaxBudget), or every call is refused"},
		{ok, []deadlinehttp.HandlerOption{deadlinehttp.WithFloor(time.Minute)},
			"deadline: invalid WithFloor 1m0s: must be below the maximum budget 30s (WithMaxBudget), or every call is refused"},
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

// TestHandlerAdmission: WithAdmission sees, once per request, what was
// decided and why.
func TestHandlerAdmission(t *testing.T) {
	max, floor := deadlinehttp.WithMaxBudget(2*time.Second), deadlinehttp.WithFloor(20*time.Millisecond)
	base := deadlinehttp.Admission{MaxBudget: 2 * time.Second, Floor: 20 * time.Millisecond}
	with := func(f func(*deadlinehttp.Admission)) deadlinehttp.Admission { a := base; f(&a); return a }
	cases := []struct {
		name string
		in   arrival
		opts []deadlinehttp.HandlerOption
		want deadlinehttp.Admission
	}{
		{"no header", arrival{}, nil, with(func(a *deadlinehttp.Admission) {
			a.Budget, a.Limit = 2*time.Second, deadlinehttp.LimitMax
		})},
		{"a header within the maximum", arrival{header: []string{"500"}}, nil, with(func(a *deadlinehttp.Admission) {
			a.HeaderPresent, a.HeaderValid, a.HeaderBudget = true, true, 500*time.Millisecond
			a.Budget, a.Limit = 500*time.Millisecond, deadlinehttp.LimitHeader
		})},
		{"a header clamped", arrival{header: []string{"9999999999"}}, nil, with(func(a *deadlinehttp.Admission) {
			a.HeaderPresent, a.HeaderValid, a.HeaderBudget = true, true, deadlinehttp.MaxBudget
			a.Budget, a.Limit = 2*time.Second, deadlinehttp.LimitMax
		})},
		{"malformed without a valid member", arrival{header: []string{"soon"}}, nil, with(func(a *deadlinehttp.Admission) {
			a.HeaderPresent, a.HeaderMalformed = true, true
			a.Budget, a.Limit = 2*time.Second, deadlinehttp.LimitMax
		})},
		{"malformed with a valid member", arrival{header: []string{"soon, 300"}}, nil, with(func(a *deadlinehttp.Admission) {
			a.HeaderPresent, a.HeaderMalformed, a.HeaderValid, a.HeaderBudget = true, true, true, 300*time.Millisecond
			a.Budget, a.Limit = 300*time.Millisecond, deadlinehttp.LimitHeader
		})},
		{"stripped", arrival{header: []string{"300"}}, []deadlinehttp.HandlerOption{deadlinehttp.WithStripHeader()}, with(func(a *deadlinehttp.Admission) {
			a.HeaderPresent, a.HeaderStripped = true, true
			a.Budget, a.Limit = 2*time.Second, deadlinehttp.LimitMax
		})},
		{"stripped but absent", arrival{}, []deadlinehttp.HandlerOption{deadlinehttp.WithStripHeader()}, with(func(a *deadlinehttp.Admission) {
			a.Budget, a.Limit = 2*time.Second, deadlinehttp.LimitMax
		})},
		{"zero", arrival{header: []string{"0"}}, nil, with(func(a *deadlinehttp.Admission) {
			a.HeaderPresent, a.HeaderValid = true, true
			a.Limit, a.Refusal = deadlinehttp.LimitHeader, deadlinehttp.RefusalSpent
		})},
		{"at the floor", arrival{header: []string{"20"}}, nil, with(func(a *deadlinehttp.Admission) {
			a.HeaderPresent, a.HeaderValid, a.HeaderBudget = true, true, 20*time.Millisecond
			a.Budget, a.Limit, a.Refusal = 20*time.Millisecond, deadlinehttp.LimitHeader, deadlinehttp.RefusalFloor
		})},
		{"the context ends first", arrival{header: []string{"500"}, ctx: ms(300)}, nil, with(func(a *deadlinehttp.Admission) {
			a.HeaderPresent, a.HeaderValid, a.HeaderBudget = true, true, 500*time.Millisecond
			a.HasContextDeadline, a.ContextRemaining = true, 300*time.Millisecond
			a.Budget, a.Limit = 300*time.Millisecond, deadlinehttp.LimitContext
		})},
		{"the context ends later", arrival{header: []string{"500"}, stored: ms(800)}, nil, with(func(a *deadlinehttp.Admission) {
			a.HeaderPresent, a.HeaderValid, a.HeaderBudget = true, true, 500*time.Millisecond
			a.HasContextDeadline, a.ContextRemaining = true, 800*time.Millisecond
			a.Budget, a.Limit = 500*time.Millisecond, deadlinehttp.LimitHeader
		})},
		{"the context had ended", arrival{ctx: ms(-7)}, nil, with(func(a *deadlinehttp.Admission) {
			a.HasContextDeadline, a.ContextRemaining = true, -7*time.Millisecond
			a.Limit, a.Refusal = deadlinehttp.LimitContext, deadlinehttp.RefusalSpent
		})},
		{"the context below the floor", arrival{ctx: ms(12)}, nil, with(func(a *deadlinehttp.Admission) {
			a.HasContextDeadline, a.ContextRemaining = true, 12*time.Millisecond
			a.Budget, a.Limit, a.Refusal = 12*time.Millisecond, deadlinehttp.LimitContext, deadlinehttp.RefusalFloor
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, tc.in, append([]deadlinehttp.HandlerOption{max, floor}, tc.opts...)...)
			assert.Equal(t, tc.want, s.admissions[0])
			assert.Equal(t, !tc.want.Refused(), s.called)
		})
	}
}

// TestHandlerAdmissionBeforeNextAndRefusal: the observation comes before
// next runs and before the refusal is written, with the request as it
// arrived.
func TestHandlerAdmissionBeforeNextAndRefusal(t *testing.T) {
	var events []string
	rec := httptest.NewRecorder()
	h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		events = append(events, "next")
	}), deadlinehttp.WithFloor(10*time.Millisecond), deadlinehttp.WithAdmission(func(r *http.Request, a deadlinehttp.Admission) {
		_, has := deadline.FromContext(r.Context())
		events = append(events, fmt.Sprintf("admission: %v, refusal written: %t, context budget: %t",
			a.Refusal, rec.Header().Get(deadlinehttp.RefusedHeader) != "", has))
	}))
	require.NoError(t, err)
	for _, v := range []string{"500", "5"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(deadlinehttp.DefaultHeader, v)
		h.ServeHTTP(rec, r)
	}
	assert.Equal(t, []string{
		"admission: none, refusal written: false, context budget: false",
		"next",
		"admission: floor, refusal written: false, context budget: false",
	}, events)
}

func TestLimitAndRefusalNames(t *testing.T) {
	assert.Equal(t, "header", deadlinehttp.LimitHeader.String())
	assert.Equal(t, "max", deadlinehttp.LimitMax.String())
	assert.Equal(t, "context", deadlinehttp.LimitContext.String())
	assert.Equal(t, "unknown", deadlinehttp.Limit(0).String())
	assert.Equal(t, "none", deadlinehttp.RefusalNone.String())
	assert.Equal(t, "spent", deadlinehttp.RefusalSpent.String())
	assert.Equal(t, "floor", deadlinehttp.RefusalFloor.String())
	assert.Equal(t, "unknown", deadlinehttp.Refusal(9).String())
}

// recordingWriter records every call made on it, and fails the test when
// one comes after next returned.
type recordingWriter struct {
	t        *testing.T
	returned bool // next has returned
	header   http.Header
	calls    []string
}

func (w *recordingWriter) Header() http.Header { w.note("Header"); return w.header }
func (w *recordingWriter) Write(b []byte) (int, error) {
	w.note("Write " + string(b))
	return len(b), nil
}
func (w *recordingWriter) WriteHeader(code int) { w.note("WriteHeader " + http.StatusText(code)) }
func (w *recordingWriter) note(call string) {
	if w.returned {
		w.t.Errorf("%s after next returned", call)
	}
	w.calls = append(w.calls, call)
}

// TestHandlerWritesNothingAfterNext: a handler whose lease ends returns
// without writing (or aborts); the middleware adds nothing once next has
// returned, and lets the abort through.
func TestHandlerWritesNothingAfterNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &recordingWriter{t: t, header: http.Header{}}
		var cause error
		h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			defer func() { w.returned = true }()
			<-r.Context().Done() // the work outlives the lease
			cause = context.Cause(r.Context())
		}), deadlinehttp.WithFloor(5*time.Millisecond))
		require.NoError(t, err)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(deadlinehttp.DefaultHeader, "40")
		start := time.Now()
		h.ServeHTTP(w, r)
		assert.Equal(t, 40*time.Millisecond, time.Since(start))
		assert.ErrorIs(t, cause, deadline.ErrDeadlineReached)
		assert.Empty(t, w.calls)
	})

	synctest.Test(t, func(t *testing.T) {
		w := &recordingWriter{t: t, header: http.Header{}}
		var done context.Context
		h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			defer func() { w.returned = true }()
			done = r.Context()
			<-done.Done()
			panic(http.ErrAbortHandler)
		}))
		require.NoError(t, err)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(deadlinehttp.DefaultHeader, "40")
		assert.PanicsWithValue(t, http.ErrAbortHandler, func() { h.ServeHTTP(w, r) }, "the abort reaches net/http")
		assert.Empty(t, w.calls)
		assert.True(t, errors.Is(done.Err(), context.DeadlineExceeded))
	})
}

// TestHandlerOnTheWire: over loopback, through a proxy that appends its own
// budget line, the smallest line still counts, and a spent budget is
// refused with the public header and nothing else.
func TestHandlerOnTheWire(t *testing.T) {
	type result struct {
		budget time.Duration
		lines  []string
	}
	got := make(chan result, 1)
	h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := deadline.FromContext(r.Context())
		got <- result{d.Budget(), r.Header.Values(deadlinehttp.DefaultHeader)}
	}), deadlinehttp.WithMaxBudget(2*time.Second), deadlinehttp.WithFloor(10*time.Millisecond))
	require.NoError(t, err)
	backend := httptest.NewServer(h)
	defer backend.Close()
	target, err := url.Parse(backend.URL)
	require.NoError(t, err)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Add(deadlinehttp.DefaultHeader, "60000") // a proxy that tries to grant more
		},
		Transport: backend.Client().Transport,
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	client := front.Client()
	defer client.CloseIdleConnections()

	send := func(lines ...string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, front.URL, nil)
		require.NoError(t, err)
		for _, v := range lines {
			req.Header.Add(deadlinehttp.DefaultHeader, v)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		return resp
	}

	resp := send("50", "20")
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	r := <-got
	assert.Equal(t, 20*time.Millisecond, r.budget)
	assert.Equal(t, []string{"50", "20", "60000"}, r.lines, "three lines arrived")

	resp = send("1500, 30")
	resp.Body.Close()
	assert.Equal(t, 30*time.Millisecond, (<-got).budget)

	resp = send("0")
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	assert.Equal(t, "budget-ms=0, floor-ms=10", resp.Header.Get(deadlinehttp.RefusedHeader))
	assert.Equal(t, "deadline budget too small: budget-ms=0, floor-ms=10\n", string(body))
	assert.Empty(t, got, "next did not run")
	proxy.Transport.(*http.Transport).CloseIdleConnections()
}
