package deadline_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
)

// stepEstimator is a CompletionEstimator whose attempts complete within
// need with probability high and within less with probability low: a step
// whose service time is about need. It keeps the leases it was asked about.
type stepEstimator struct {
	need      time.Duration
	high, low float64
	samples   uint64
	ok        bool

	mu     sync.Mutex
	leases []time.Duration
}

func (e *stepEstimator) Completion(step string, lease time.Duration) (deadline.Estimate, bool) {
	e.mu.Lock()
	e.leases = append(e.leases, lease)
	e.mu.Unlock()
	p := e.low
	if lease >= e.need {
		p = e.high
	}
	return deadline.Estimate{P: p, Samples: e.samples}, e.ok
}

func learnedPolicy(est deadline.CompletionEstimator) deadline.Policy {
	p := deadline.Policy{Name: "fetch", MaxAttempts: 3, Floor: 20 * time.Millisecond}
	p.LearnedFloor = &deadline.LearnedFloor{Estimator: est, Threshold: 0.05}
	return p
}

func TestLearnedFloorValidation(t *testing.T) {
	est := &stepEstimator{ok: true}
	for _, tc := range []struct {
		name  string
		f     deadline.LearnedFloor
		field string
	}{
		{"no estimator", deadline.LearnedFloor{Threshold: 0.05}, "Policy.LearnedFloor.Estimator"},
		{"threshold 0", deadline.LearnedFloor{Estimator: est}, "Policy.LearnedFloor.Threshold"},
		{"threshold 1", deadline.LearnedFloor{Estimator: est, Threshold: 1}, "Policy.LearnedFloor.Threshold"},
		{"threshold negative", deadline.LearnedFloor{Estimator: est, Threshold: -0.1}, "Policy.LearnedFloor.Threshold"},
		{"threshold NaN", deadline.LearnedFloor{Estimator: est, Threshold: math.NaN()}, "Policy.LearnedFloor.Threshold"},
		{"probe share negative", deadline.LearnedFloor{Estimator: est, Threshold: 0.05, ProbeShare: -0.01}, "Policy.LearnedFloor.ProbeShare"},
		{"probe share above 1", deadline.LearnedFloor{Estimator: est, Threshold: 0.05, ProbeShare: 1.5}, "Policy.LearnedFloor.ProbeShare"},
		{"probe share NaN", deadline.LearnedFloor{Estimator: est, Threshold: 0.05, ProbeShare: math.NaN()}, "Policy.LearnedFloor.ProbeShare"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := deadline.DefaultPolicy()
			p.LearnedFloor = &tc.f
			err := p.Validate()
			var pe *deadline.PolicyError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.field, pe.Field)
			assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)

			called := false
			_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, func(context.Context, deadline.AttemptInfo) (int, error) {
				called = true
				return 1, nil
			})
			require.ErrorAs(t, err, &pe)
			assert.False(t, called, "an invalid policy runs nothing")
		})
	}
	p := deadline.DefaultPolicy()
	p.LearnedFloor = &deadline.LearnedFloor{Estimator: est, Threshold: 0.05, ProbeShare: 1}
	assert.NoError(t, p.Validate())
}

// An attempt whose lease would very likely not suffice is refused before
// op runs: the stop reason is its own, it still matches the refusal
// sentinel and context.DeadlineExceeded, and the error and CallEnd say
// which lease, which probability and how many samples.
func TestLearnedFloorRefusesTheFirstAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		est := &stepEstimator{need: 2 * time.Second, high: 0.97, low: 0.02, samples: 400, ok: true}
		p := learnedPolicy(est)
		var call deadline.CallResult
		p.Hooks = &deadline.Hooks{CallEnd: func(_ context.Context, r deadline.CallResult) { call = r }}
		called := false
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(context.Context, deadline.AttemptInfo) (int, error) {
			called = true
			return 1, nil
		})
		assert.False(t, called)
		se := stopErr(err)
		require.NotNil(t, se)
		assert.Equal(t, deadline.ReasonRefusedLearned, se.Reason)
		assert.Equal(t, "refused_learned", se.Reason.String())
		assert.ErrorIs(t, err, deadline.ErrRefusedLearned)
		assert.ErrorIs(t, err, deadline.ErrRefused)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.True(t, se.Timeout())
		assert.Equal(t, 980*time.Millisecond, se.Lease)
		assert.Equal(t, deadline.Estimate{P: 0.02, Samples: 400}, se.Estimate)
		assert.Equal(t, "fetch: refused before attempt 1: a 980ms lease completes 2.0% of the time (400 recent samples)", err.Error())

		assert.Equal(t, deadline.ReasonRefusedLearned, call.Reason)
		assert.Equal(t, 980*time.Millisecond, call.Lease)
		assert.Equal(t, se.Estimate, call.Estimate)
		assert.Equal(t, deadline.VerdictDeadlineTooSmall, deadline.VerdictOf(call))
	})
}

// Without an answer, or with one resting on fewer samples than MinSamples,
// the policy behaves exactly as without a learned floor.
func TestLearnedFloorWithoutEnoughSamplesChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		est  *stepEstimator
		min  uint64
	}{
		{"no answer", &stepEstimator{need: time.Hour, low: 0.01, samples: 1000, ok: false}, 0},
		{"below MinSamples", &stepEstimator{need: time.Hour, low: 0.01, samples: 99, ok: true}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := learnedPolicy(tc.est)
				p.LearnedFloor.MinSamples = tc.min
				var log attemptLog
				v, err := deadline.Do(context.Background(), deadline.New(time.Second), p, script(&log, fail(deadline.Retryable(errors.New("503"))), ok))
				require.NoError(t, err)
				assert.Equal(t, 2, v)
				require.Len(t, log.infos, 2)
				for _, a := range log.infos {
					assert.Zero(t, a.Estimate)
					assert.False(t, a.Probe)
				}
				assert.NotEmpty(t, tc.est.leases, "the estimator was asked")
			})
		})
	}
}

// An attempt whose lease suffices starts and carries the estimate.
func TestLearnedFloorAdmitsAndReportsTheEstimate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		est := &stepEstimator{need: 100 * time.Millisecond, high: 0.97, low: 0.02, samples: 400, ok: true}
		var log attemptLog
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), learnedPolicy(est), script(&log, ok))
		require.NoError(t, err)
		require.Len(t, log.infos, 1)
		assert.Equal(t, deadline.Estimate{P: 0.97, Samples: 400}, log.infos[0].Estimate)
		assert.False(t, log.infos[0].Probe)
		assert.Equal(t, []time.Duration{980 * time.Millisecond}, est.leases)
	})
}

// A retry is judged on the lease it would get after its backoff, before the
// backoff: when that lease would very likely fail, the call stops at once,
// without sleeping, without a retry-budget token, keeping the last error.
func TestLearnedFloorRefusesTheRetryBeforeItsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		est := &stepEstimator{need: 500 * time.Millisecond, high: 0.97, low: 0.01, samples: 400, ok: true}
		p := learnedPolicy(est)
		p.Backoff = deadline.Backoff{Base: 100 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: deadline.JitterNone}
		rb, err := deadline.NewRetryBudget(deadline.WithRetryRatio(1), deadline.WithMinRetryRate(0))
		require.NoError(t, err)
		p.RetryBudget = rb
		var backoffs []deadline.BackoffInfo
		p.Hooks = &deadline.Hooks{Backoff: func(_ context.Context, b deadline.BackoffInfo) { backoffs = append(backoffs, b) }}
		last := deadline.Retryable(errors.New("503"))
		start := time.Now()
		var log attemptLog
		// The first attempt takes 500ms: 480ms are left, 380ms after the
		// backoff, less the floor 360ms, below what the step needs.
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, script(&log, after(500*time.Millisecond, last)))
		se := stopErr(err)
		require.NotNil(t, se)
		assert.Equal(t, deadline.ReasonRefusedLearned, se.Reason)
		assert.Equal(t, 1, se.Attempts)
		assert.ErrorIs(t, err, last, "the last attempt's error is kept")
		assert.Equal(t, 500*time.Millisecond, time.Since(start), "no backoff slept")
		assert.Equal(t, 380*time.Millisecond, se.Lease)
		assert.Equal(t, 1, rb.Balance(), "the first attempt's deposit, no token withdrawn")
		require.Len(t, backoffs, 1)
		assert.True(t, backoffs[0].RefusedLearned)
		assert.False(t, backoffs[0].RetryBudget)
		assert.Equal(t, 380*time.Millisecond, backoffs[0].Lease)
		assert.Equal(t, 0.01, backoffs[0].Estimate.P)
		assert.Contains(t, err.Error(), "refused before attempt 2: a 380ms lease completes 1.0% of the time (400 recent samples) (after 1 attempt): 503")
	})
}

// A ProbeShare of the would-be-refused attempts go out, marked as probes,
// drawn with the policy's Rand; a retry let through as a probe before its
// backoff is not drawn again.
func TestLearnedFloorProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		est := &stepEstimator{need: time.Hour, low: 0.01, samples: 400, ok: true}
		p := learnedPolicy(est)
		p.LearnedFloor.ProbeShare = 0.1
		draws := 0
		p.Rand = func(n int64) int64 { draws++; return n / 20 } // 0.05 < 0.1: a probe
		var log attemptLog
		v, err := deadline.Do(context.Background(), deadline.New(time.Second), p, script(&log, fail(deadline.Retryable(errors.New("503"))), ok))
		require.NoError(t, err)
		assert.Equal(t, 2, v)
		require.Len(t, log.infos, 2)
		for _, a := range log.infos {
			assert.True(t, a.Probe)
			assert.Equal(t, 0.01, a.Estimate.P)
		}
		assert.Equal(t, 2, draws, "one draw for the first attempt, one for the retry before its backoff")

		p.Rand = func(n int64) int64 { return n / 5 } // 0.2 >= 0.1: refused
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, ok)
		assert.ErrorIs(t, err, deadline.ErrRefusedLearned)
	})
}

// A hedge the learned floor refuses is not started; the round goes on and
// the first attempt's result is the call's.
func TestLearnedFloorRefusesAHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first attempt is granted 980ms; the hedge, 100ms later, 880ms.
		est := &stepEstimator{need: 900 * time.Millisecond, high: 0.97, low: 0.01, samples: 400, ok: true}
		p := learnedPolicy(est)
		p.Hedge = &deadline.Hedge{Delay: 100 * time.Millisecond, MaxHedges: 1}
		var log attemptLog
		v, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), p, script(&log, after(300*time.Millisecond, nil)))
		require.NoError(t, err)
		assert.Equal(t, 1, v)
		assert.Len(t, log.infos, 1, "the hedge was not started")
		assert.Equal(t, []time.Duration{980 * time.Millisecond, 880 * time.Millisecond}, est.leases)
	})
}

func TestReasonRefusedLearnedIsABudgetReason(t *testing.T) {
	r := deadline.ReasonRefusedLearned
	assert.True(t, r.Budget())
	assert.Equal(t, deadline.ErrRefusedLearned, r.Sentinel())
	assert.NotErrorIs(t, deadline.ErrRefused, deadline.ErrRefusedLearned, "the fixed floor's refusal is told apart")
	var et interface{ ErrorType() string }
	require.ErrorAs(t, deadline.ErrRefusedLearned, &et)
	assert.Equal(t, "refused_learned", et.ErrorType())
}
