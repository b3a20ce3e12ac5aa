package budgetprop_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
)

// publish injects a budget into a message's headers on the producer's
// clock, and returns them with the budget as injected (a hair under
// budget, rounded up: budget itself unless the machine stalled for a
// millisecond). The tests compute what they expect from what was sent.
func publish(t *testing.T, p *budgetprop.Propagator, budget time.Duration) (propagation.MapCarrier, time.Duration) {
	t.Helper()
	c := carrier()
	p.Inject(deadline.NewContext(context.Background(), deadline.New(budget)), c)
	ms, err := strconv.ParseInt(c[budgetprop.FieldBudget], 10, 64)
	require.NoError(t, err)
	return c, time.Duration(ms) * time.Millisecond
}

// consume runs Consume and reports whether handle ran, with the
// Extraction it saw.
func consume(t *testing.T, p *budgetprop.Propagator, c propagation.TextMapCarrier) (budgetprop.Extraction, bool, error) {
	t.Helper()
	var x budgetprop.Extraction
	ran := false
	err := p.Consume(context.Background(), c, func(ctx context.Context) error {
		ran = true
		var ok bool
		x, ok = budgetprop.FromContext(ctx)
		require.True(t, ok)
		d, ok := deadline.FromContext(ctx)
		require.True(t, ok)
		assert.Equal(t, x.Admission.Deadline, d)
		_, hasCtxDeadline := ctx.Deadline()
		assert.True(t, hasCtxDeadline, "handle's context ends at the deadline")
		return nil
	})
	if !ran {
		var re *budgetprop.RefusedError
		if errors.As(err, &re) {
			x = re.Extraction
		}
	}
	return x, ran, err
}

func TestConsumeChargesQueueTime(t *testing.T) {
	clk := newClock()
	producer := newProp(t, budgetprop.WithClock(clk.Now))
	msg, sent := publish(t, producer, 2*time.Second)

	// Taken after 500 ms: about 1.5 s left.
	x, ran, err := consume(t, newProp(t, budgetprop.WithClock(clk.at(500*time.Millisecond))), msg)
	require.NoError(t, err)
	require.True(t, ran)
	assert.True(t, x.Queued)
	assert.Equal(t, 500*time.Millisecond, x.QueueTime)
	assert.Equal(t, sent-500*time.Millisecond, x.Admission.Inbound.Budget)
	assert.Equal(t, sent-500*time.Millisecond, x.Admission.Budget)
	assert.InDelta(t, 1500*time.Millisecond, x.Admission.Budget, float64(5*time.Millisecond))
	assert.Equal(t, admission.ByInbound, x.Admission.Limit)

	// Taken after 3 s: expired, not processed, reported.
	x, ran, err = consume(t, newProp(t, budgetprop.WithClock(clk.at(3*time.Second))), msg)
	assert.False(t, ran)
	require.ErrorIs(t, err, budgetprop.ErrRefused)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var re *budgetprop.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, admission.RefusalSpent, re.Reason())
	assert.Equal(t, 3*time.Second, x.QueueTime)
	assert.Equal(t, "budgetprop: refused: budget spent (0s left after 3s queued)", err.Error())

	// Left with less than the floor: refused as such.
	_, ran, err = consume(t, newProp(t, budgetprop.WithClock(clk.at(1990*time.Millisecond)), budgetprop.WithFloor(50*time.Millisecond)), msg)
	assert.False(t, ran)
	require.ErrorAs(t, err, &re)
	assert.Equal(t, admission.RefusalFloor, re.Reason())
}

// ±200 ms of skew with the default allowance: a message with 1 s left is
// not refused, and gets no more than it has plus the allowance.
func TestConsumeClockSkew(t *testing.T) {
	clk := newClock()
	producer := newProp(t, budgetprop.WithClock(clk.Now))
	msg, sent := publish(t, producer, 2*time.Second)
	const queued = time.Second // about 1 s left when consumed
	for _, skew := range []time.Duration{-200 * time.Millisecond, 0, 200 * time.Millisecond} {
		x, ran, err := consume(t, newProp(t, budgetprop.WithClock(clk.at(queued+skew))), msg)
		require.NoError(t, err, "skew %v", skew)
		assert.True(t, ran)
		left := sent - queued
		assert.LessOrEqual(t, x.Admission.Budget, left+budgetprop.DefaultSkewAllowance, "skew %v", skew)
		// The error is the skew itself: a clock ahead charges it, a clock
		// behind gives it.
		assert.Equal(t, left-skew, x.Admission.Budget, "skew %v", skew)
		assert.False(t, x.SkewExceeded)
	}

	// A consumer whose clock is behind by more than the allowance: the
	// expiry is later than the relative budget allows; flagged, and the
	// relative budget (which cannot count the queue time) is the most it
	// gets.
	x, ran, err := consume(t, newProp(t, budgetprop.WithClock(clk.at(-time.Second))), msg)
	require.NoError(t, err)
	assert.True(t, ran)
	assert.True(t, x.SkewExceeded)
	assert.Equal(t, sent, x.Admission.Budget)
}

func TestConsumeWithoutBudgetGetsTheMaximum(t *testing.T) {
	p := newProp(t, budgetprop.WithMaxBudget(3*time.Second))
	x, ran, err := consume(t, p, carrier())
	require.NoError(t, err)
	assert.True(t, ran)
	assert.False(t, x.Usable())
	assert.Equal(t, 3*time.Second, x.Admission.Budget)
	assert.Equal(t, admission.ByMax, x.Admission.Limit)

	// Only a relative budget: used, its queue time uncounted.
	x, _, err = consume(t, p, carrier(budgetprop.FieldBudget, "1200"))
	require.NoError(t, err)
	assert.Equal(t, 1200*time.Millisecond, x.Admission.Budget)
	assert.Zero(t, x.QueueTime)
}

func TestConsumeReturnsHandleErrorUntouched(t *testing.T) {
	p := newProp(t)
	boom := errors.New("boom")
	err := p.Consume(context.Background(), carrier(budgetprop.FieldBudget, "1000"), func(context.Context) error { return boom })
	assert.Same(t, boom, err)

	err = p.Consume(context.Background(), carrier(), nil)
	require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
}
