package budgetprop_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
)

func TestNewRejectsInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []budgetprop.Option
		field string
	}{
		{"max zero", []budgetprop.Option{budgetprop.WithMaxBudget(0)}, "WithMaxBudget"},
		{"floor negative", []budgetprop.Option{budgetprop.WithFloor(-1)}, "WithFloor"},
		{"floor at max", []budgetprop.Option{budgetprop.WithMaxBudget(time.Second), budgetprop.WithFloor(time.Second)}, "WithFloor"},
		{"skew negative", []budgetprop.Option{budgetprop.WithSkewAllowance(-time.Millisecond)}, "budgetprop.WithSkewAllowance"},
		{"skew overflowing", []budgetprop.Option{budgetprop.WithSkewAllowance(math.MaxInt64)}, "budgetprop.WithSkewAllowance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := budgetprop.New(tc.opts...)
			assert.Nil(t, p)
			require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
			var pe *deadline.PolicyError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.field, pe.Field)
		})
	}
	p, err := budgetprop.New(nil, budgetprop.WithClock(nil))
	require.NoError(t, err)
	assert.Equal(t, []string{budgetprop.FieldBudget, budgetprop.FieldExpiry}, p.Fields())
}

func TestInject(t *testing.T) {
	clk := newClock()
	p := newProp(t, budgetprop.WithClock(clk.Now))
	now := clk.Now().UnixMilli()

	c := carrier()
	p.Inject(context.Background(), c)
	assert.Empty(t, c, "no deadline, nothing injected")

	// What is left at injection, rounded up; the expiry is now plus that.
	d := deadline.New(870 * time.Millisecond)
	c = carrier()
	p.Inject(deadline.NewContext(context.Background(), d), c)
	sent, err := strconv.ParseInt(c[budgetprop.FieldBudget], 10, 64)
	require.NoError(t, err)
	assert.LessOrEqual(t, sent, int64(870))
	assert.GreaterOrEqual(t, sent, d.Remaining().Milliseconds())
	assert.Equal(t, strconv.FormatInt(now+sent, 10), c[budgetprop.FieldExpiry])

	// A context's own deadline counts too, and the sooner one wins.
	ctx, cancel := context.WithTimeout(deadline.NewContext(context.Background(), deadline.New(time.Hour)), 2*time.Second)
	defer cancel()
	c = carrier()
	p.Inject(ctx, c)
	sent, err = strconv.ParseInt(c[budgetprop.FieldBudget], 10, 64)
	require.NoError(t, err)
	assert.LessOrEqual(t, sent, int64(2000))
	assert.Greater(t, sent, int64(1000))

	// Spent: 1, never 0; the expiry is in the past.
	c = carrier()
	p.Inject(deadline.NewContext(context.Background(), deadline.New(-time.Second)), c)
	assert.Equal(t, "1", c[budgetprop.FieldBudget])
	exp, err := strconv.ParseInt(c[budgetprop.FieldExpiry], 10, 64)
	require.NoError(t, err)
	assert.LessOrEqual(t, exp, now-999)

	// An HTTP header carrier: the key is the deadlinehttp header.
	h := http.Header{}
	p.Inject(deadline.NewContext(context.Background(), deadline.New(time.Second)), propagation.HeaderCarrier(h))
	_, ok := deadlinehttp.ParseBudget(h.Get(deadlinehttp.DefaultHeader))
	assert.True(t, ok, "deadlinehttp reads what the propagator writes")
}

// extract runs Extract and returns the Extraction it stored.
func extract(t *testing.T, p *budgetprop.Propagator, ctx context.Context, c propagation.TextMapCarrier) (budgetprop.Extraction, context.Context) {
	t.Helper()
	ctx = p.Extract(ctx, c)
	x, ok := budgetprop.FromContext(ctx)
	require.True(t, ok, "an Extraction is stored")
	return x, ctx
}

func TestExtractDirectHopUsesTheRelativeBudget(t *testing.T) {
	clk := newClock()
	// What a sender injected just now, on clk: 1 s.
	c := carrier(budgetprop.FieldBudget, "1000", budgetprop.FieldExpiry, strconv.FormatInt(clk.Now().UnixMilli()+1000, 10))

	// Clocks within the allowance, either way: the relative budget, exact.
	for _, skew := range []time.Duration{0, 200 * time.Millisecond, -200 * time.Millisecond, budgetprop.DefaultSkewAllowance} {
		recv := newProp(t, budgetprop.WithClock(clk.at(skew)))
		x, ctx := extract(t, recv, context.Background(), c)
		assert.Equal(t, time.Second, x.SentBudget)
		assert.Equal(t, time.Second, x.Admission.Budget, "skew %v", skew)
		assert.Equal(t, admission.ByInbound, x.Admission.Limit)
		assert.False(t, x.Refused())
		d, ok := deadline.FromContext(ctx)
		require.True(t, ok)
		assert.Equal(t, x.Admission.Deadline, d)
		assert.NoError(t, budgetprop.Check(ctx))
	}

	// A relative value that went stale on the way (held 1 s by a proxy
	// that forwards headers verbatim): charged, less the allowance.
	recv := newProp(t, budgetprop.WithClock(clk.at(time.Second)))
	x, _ := extract(t, recv, context.Background(), c)
	assert.Equal(t, budgetprop.DefaultSkewAllowance, x.Admission.Budget)
}

// On HTTP, deadlinehttp.NewHandler and a receiver with only the
// propagator read the same header and agree.
func TestExtractAgreesWithDeadlineHTTPHandler(t *testing.T) {
	p := newProp(t)
	for _, lease := range []time.Duration{time.Millisecond, 850 * time.Millisecond, 40 * time.Second} {
		var got deadlinehttp.Admission
		var x budgetprop.Extraction
		h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
			deadlinehttp.WithAdmission(func(r *http.Request, a deadlinehttp.Admission) {
				got = a
				x, _ = extract(t, p, context.Background(), propagation.HeaderCarrier(r.Header))
			}))
		require.NoError(t, err)

		req := httptest.NewRequest(http.MethodGet, "/", nil)
		// What the propagator injects: both fields.
		p.Inject(deadline.NewContext(context.Background(), deadline.New(lease)), propagation.HeaderCarrier(req.Header))
		h.ServeHTTP(httptest.NewRecorder(), req)

		assert.Equal(t, got.HeaderBudget, x.SentBudget, "lease %v", lease)
		assert.Equal(t, got.Budget, x.Admission.Budget, "lease %v", lease)
		assert.Equal(t, got.Limit, x.Admission.Limit, "lease %v", lease)
	}
}

func TestExtractClampsAndRefuses(t *testing.T) {
	p := newProp(t, budgetprop.WithMaxBudget(5*time.Second), budgetprop.WithFloor(20*time.Millisecond))

	x, _ := extract(t, p, context.Background(), carrier(budgetprop.FieldBudget, "60000"))
	assert.Equal(t, 5*time.Second, x.Admission.Budget)
	assert.Equal(t, admission.ByMax, x.Admission.Limit)

	x, ctx := extract(t, p, context.Background(), carrier(budgetprop.FieldBudget, "15"))
	assert.Equal(t, admission.RefusalFloor, x.Admission.Refusal)
	err := budgetprop.Check(ctx)
	var re *budgetprop.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, admission.RefusalFloor, re.Reason())
	assert.ErrorIs(t, err, budgetprop.ErrRefused)
	assert.ErrorIs(t, err, deadline.ErrRefused)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "budgetprop: refused: budget 15ms at or below the 20ms floor", err.Error())
	assert.Equal(t, "deadline_refused", re.ErrorType())

	// An outer deadline (gRPC's, on the server's context) still binds.
	outer, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	x, _ = extract(t, p, outer, carrier(budgetprop.FieldBudget, "3000"))
	assert.Equal(t, admission.ByOuter, x.Admission.Limit)
	assert.LessOrEqual(t, x.Admission.Budget, time.Second)
}

// TestExtractionBudgetIsTheEffectiveOne: Extraction.Budget is the budget
// the receiver works under (clamped to its maximum, lowered by an outer
// deadline, by a stale expiry), and the value as sent is the one with the
// qualified name, SentBudget, so that x.Budget never means a budget the
// receiver did not grant.
func TestExtractionBudgetIsTheEffectiveOne(t *testing.T) {
	p := newProp(t, budgetprop.WithMaxBudget(5*time.Second))
	x, ctx := extract(t, p, context.Background(), carrier(budgetprop.FieldBudget, "60000"))
	assert.Equal(t, 5*time.Second, x.Budget(), "clamped to the maximum")
	assert.Equal(t, 60*time.Second, x.SentBudget, "as sent")
	d, _ := deadline.FromContext(ctx)
	assert.Equal(t, d.Budget(), x.Budget(), "the Deadline's")

	outer, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	x, _ = extract(t, p, outer, carrier(budgetprop.FieldBudget, "3000"))
	assert.LessOrEqual(t, x.Budget(), time.Second, "an outer deadline binds")
	assert.Equal(t, 3*time.Second, x.SentBudget)

	assert.Zero(t, budgetprop.Extraction{Malformed: true}.Budget(), "nothing usable")
}

// Bad input has a documented outcome: ignored (malformed member) or
// refused (spent), never a panic, never more than the maximum.
func TestExtractBadInput(t *testing.T) {
	clk := newClock()
	now := clk.Now().UnixMilli()
	p := newProp(t, budgetprop.WithClock(clk.Now), budgetprop.WithMaxBudget(10*time.Second))
	expiry := func(d time.Duration) string { return strconv.FormatInt(now+d.Milliseconds(), 10) }
	const none = time.Duration(-1)
	for _, tc := range []struct {
		name      string
		c         propagation.TextMapCarrier
		malformed bool
		budget    time.Duration // effective; none: no decision (ignored)
		refusal   admission.Refusal
	}{
		{"malformed budget", carrier(budgetprop.FieldBudget, "1.5s"), true, none, admission.RefusalNone},
		{"negative budget", carrier(budgetprop.FieldBudget, "-500"), true, none, admission.RefusalNone},
		{"overflowing budget", carrier(budgetprop.FieldBudget, "99999999999999999999999"), true, none, admission.RefusalNone},
		{"empty list", carrier(budgetprop.FieldBudget, " , "), true, none, admission.RefusalNone},
		{"zero budget: spent", carrier(budgetprop.FieldBudget, "0"), false, 0, admission.RefusalSpent},
		{"duplicated: the smallest", propagation.HeaderCarrier(http.Header{"Deadline-Budget-Ms": {"900", "300, 700"}}), false, 300 * time.Millisecond, admission.RefusalNone},
		{"malformed beside valid", carrier(budgetprop.FieldBudget, "abc, 400"), true, 400 * time.Millisecond, admission.RefusalNone},
		{"huge budget: the maximum", carrier(budgetprop.FieldBudget, "9999999999"), false, 10 * time.Second, admission.RefusalNone},
		{"malformed expiry ignored", carrier(budgetprop.FieldBudget, "800", budgetprop.FieldExpiry, "soon"), true, 800 * time.Millisecond, admission.RefusalNone},
		{"overflowing expiry ignored", carrier(budgetprop.FieldBudget, "800", budgetprop.FieldExpiry, "1234567890123456"), true, 800 * time.Millisecond, admission.RefusalNone},
		{"far-future expiry: the relative budget", carrier(budgetprop.FieldBudget, "800", budgetprop.FieldExpiry, "999999999999999"), false, 800 * time.Millisecond, admission.RefusalNone},
		{"far-past expiry: spent", carrier(budgetprop.FieldBudget, "800", budgetprop.FieldExpiry, "1"), false, 0, admission.RefusalSpent},
		{"only an expiry", carrier(budgetprop.FieldExpiry, expiry(700*time.Millisecond)), false, 700 * time.Millisecond, admission.RefusalNone},
		{"only a far-future expiry: the maximum", carrier(budgetprop.FieldExpiry, "999999999999999"), false, 10 * time.Second, admission.RefusalNone},
		{"duplicated expiry: the earliest", propagation.HeaderCarrier(http.Header{"Deadline-Expiry-Unix-Ms": {expiry(time.Hour), expiry(600 * time.Millisecond)}}), false, 600 * time.Millisecond, admission.RefusalNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := p.Extract(context.Background(), tc.c)
			x, ok := budgetprop.FromContext(ctx)
			require.True(t, ok)
			assert.Equal(t, tc.malformed, x.Malformed)
			_, hasDeadline := deadline.FromContext(ctx)
			if tc.budget == none {
				assert.False(t, x.Usable())
				assert.False(t, hasDeadline, "malformed fields are ignored: no deadline")
				assert.NoError(t, budgetprop.Check(ctx))
				return
			}
			assert.True(t, hasDeadline)
			assert.Equal(t, tc.budget, x.Admission.Budget)
			assert.LessOrEqual(t, x.Admission.Budget, 10*time.Second)
			assert.Equal(t, tc.refusal, x.Admission.Refusal)
			if tc.refusal != admission.RefusalNone {
				assert.True(t, errors.Is(budgetprop.Check(ctx), budgetprop.ErrRefused))
			}
		})
	}

	// No field at all: the context comes back unchanged.
	ctx := context.Background()
	assert.Equal(t, ctx, p.Extract(ctx, carrier("traceparent", "x")))
}
