package deadline_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
)

// The property test runs Do on random scenarios under testing/synctest and
// compares what the engine and its hooks report with an independent model
// written from the documented rules (the Do doc comment and the design
// reference), not from the engine's code.
//
// Every instant in a scenario is on the millisecond grid (budgets, ceilings,
// floors, op durations, backoffs, Retry-After), so that ties between limits
// are frequent and must always be decided the same way. The caller's
// cancellation is the exception: it lands 1ns past a millisecond, because a
// cancellation at the very instant a limit is reached is ordered by whichever
// reaches the attempt's context first (the engine does not record when the
// caller canceled), so the model leaves that tie out.

const (
	propSeed      = 0x5eed_3278b52e
	propBubbles   = 60  // synctest bubbles
	propPerBubble = 200 // cases run one after another in each bubble
)

type propOutcomeKind uint8

const (
	opOK         propOutcomeKind = iota // returns a result
	opRetryable                         // returns Retryable(errFlaky)
	opFatal                             // returns errFatal
	opRetryAfter                        // returns Retryable(RetryAfter(err503, retryAfter))
)

var propOutcomeNames = [...]string{"opOK", "opRetryable", "opFatal", "opRetryAfter"}

// propOp is what one attempt's operation does.
type propOp struct {
	dur        time.Duration
	coop       bool // ends early with ctx.Err() when its context ends; else ignores ctx
	outcome    propOutcomeKind
	retryAfter time.Duration
}

// propCase is one scenario. Instants are relative to the call's start.
type propCase struct {
	budget      time.Duration
	ctxLimit    time.Duration // the caller's context deadline; 0: none
	cancelAt    time.Duration // the caller cancels; 0: never
	ceiling     time.Duration // 0: none
	floor       time.Duration
	maxAttempts int
	backoff     deadline.Backoff
	draw        int64 // Policy.Rand returns whole milliseconds picked by draw
	ops         [4]propOp
	retryBudget propBudget // the policy's retry budget, built as the call starts
}

// propBudget is a case's retry budget: none when window is 0. Its window
// is a multiple of 10ms, so that its buckets (a tenth of it) are on the
// grid.
type propBudget struct {
	window   time.Duration
	quarters int // the ratio, in quarters: 0 to 4
	minRate  int // retries per second
	charge   int // charged when the budget is built
}

// String prints the case as a Go literal, ready to paste into
// TestDoPropertyRegressions.
func (c propCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{budget: %s, ctxLimit: %s, cancelAt: %s, ceiling: %s, floor: %s, maxAttempts: %d, ",
		lit(c.budget), lit(c.ctxLimit), lit(c.cancelAt), lit(c.ceiling), lit(c.floor), c.maxAttempts)
	fmt.Fprintf(&b, "backoff: deadline.Backoff{Base: %s, Max: %s, Jitter: %d}, draw: %d, ops: [4]propOp{",
		lit(c.backoff.Base), lit(c.backoff.Max), c.backoff.Jitter, c.draw)
	for i, op := range c.ops[:c.maxAttempts] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{dur: %s, coop: %t, outcome: %s, retryAfter: %s}", lit(op.dur), op.coop, propOutcomeNames[op.outcome], lit(op.retryAfter))
	}
	b.WriteString("}")
	if rb := c.retryBudget; rb.window > 0 {
		fmt.Fprintf(&b, ", retryBudget: propBudget{window: %s, quarters: %d, minRate: %d, charge: %d}", lit(rb.window), rb.quarters, rb.minRate, rb.charge)
	}
	b.WriteString("}")
	return b.String()
}

// lit writes d as a Go expression in milliseconds.
func lit(d time.Duration) string {
	ms, ns := d/time.Millisecond, d%time.Millisecond
	switch {
	case d == 0:
		return "0"
	case ns == 0:
		return fmt.Sprintf("%d * ms", ms)
	}
	return fmt.Sprintf("%d*ms + %d", ms, ns)
}

// rand is the case's deterministic jitter source: a whole number of
// milliseconds in [0, n).
func (c propCase) rand(n int64) int64 {
	k := n / int64(time.Millisecond)
	if k <= 0 {
		return 0
	}
	return c.draw % k * int64(time.Millisecond)
}

// genPropCase draws case i of the run. Ties are made likely on purpose: an
// op that runs exactly its ceiling, a ceiling equal to what is left, a
// caller's deadline equal to the budget.
func genPropCase(i int) propCase {
	r := rand.New(rand.NewPCG(propSeed, uint64(i)))
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Millisecond }
	chance := func(p float64) bool { return r.Float64() < p }
	var c propCase
	c.budget = ms(0, 600)
	if chance(0.5) {
		c.ctxLimit = ms(1, 600)
		if chance(0.2) {
			c.ctxLimit = max(c.budget, time.Millisecond)
		}
	}
	if chance(0.3) {
		c.cancelAt = ms(0, 600) + 1
	}
	if chance(0.6) {
		c.floor = ms(1, 50)
	}
	switch {
	case chance(0.25):
	case chance(0.15):
		// A ceiling equal to the first attempt's grant: a tie between the
		// ceiling and the deadline.
		end := c.budget
		if c.ctxLimit > 0 {
			end = min(end, c.ctxLimit)
		}
		c.ceiling = max(end-c.floor, time.Millisecond)
	default:
		c.ceiling = ms(1, 300)
	}
	c.maxAttempts = 1 + r.IntN(4)
	if chance(0.7) {
		// Even milliseconds keep equal jitter's cap/2 on the grid.
		c.backoff.Base = 2 * ms(1, 30)
		c.backoff.Max = c.backoff.Base + 2*ms(0, 100)
		c.backoff.Jitter = deadline.Jitter(r.IntN(3))
	}
	c.draw = r.Int64N(math.MaxInt64)
	for j := range c.ops {
		op := &c.ops[j]
		op.coop = chance(0.5)
		op.dur = ms(0, 300)
		switch {
		case c.ceiling > 0 && chance(0.15):
			op.dur = c.ceiling
		case !op.coop && chance(0.3):
			op.dur = ms(300, 800) // returns long after its limits
		}
		switch x := r.Float64(); {
		case x < 0.25:
			op.outcome = opOK
		case x < 0.65:
			op.outcome = opRetryable
		case x < 0.8:
			op.outcome = opFatal
		default:
			op.outcome = opRetryAfter
			op.retryAfter = ms(0, 400)
		}
	}
	// Drawn last, so that the cases without a budget stay what they were.
	if chance(0.4) {
		c.retryBudget = propBudget{
			window: 10 * ms(1, 60), quarters: r.IntN(5), minRate: []int{0, 0, 5, 10}[r.IntN(4)], charge: r.IntN(3),
		}
	}
	return c
}

// propResult is what a call did, as the model predicts it or as the engine
// and its hooks report it.
type propResult struct {
	Reason          deadline.Reason
	Attempts        int
	Granted         []time.Duration
	Limited         []deadline.Limit
	Ended           []deadline.EndedBy
	CeilingTimeouts int
	DeadlineCuts    int
	Verdict         deadline.Verdict
	Elapsed         time.Duration // the call's duration
	Remaining       time.Duration // left at the end
}

// model predicts the call from the documented rules.
func (c propCase) model() propResult {
	const never = time.Duration(math.MaxInt64)
	end := c.budget // the effective deadline: the earlier of d and ctx's
	if c.ctxLimit > 0 {
		end = min(end, c.ctxLimit)
	}
	cancel := never // a cancellation after the caller's deadline changes nothing
	if c.cancelAt > 0 && (c.ctxLimit == 0 || c.cancelAt < c.ctxLimit) {
		cancel = c.cancelAt
	}
	var res propResult
	stop := func(reason deadline.Reason, at time.Duration) propResult {
		res.Reason, res.Elapsed, res.Remaining = reason, at, end-at
		res.Verdict = modelVerdict(reason, res.CeilingTimeouts)
		return res
	}
	rb := c.retryBudget
	var taken []time.Duration // the retries the budget granted, when
	deposited := false
	now := time.Duration(0)
	for n := 1; ; n++ {
		// Before each attempt: canceled? refused?
		if cancel < now {
			return stop(deadline.ReasonCanceled, now)
		}
		remaining := end - now
		if remaining <= c.floor {
			return stop(deadline.ReasonRefused, now)
		}
		// The lease: min(ceiling, remaining - floor); a tie goes to the
		// ceiling.
		granted, limited := remaining-c.floor, deadline.LimitDeadline
		if c.ceiling > 0 && c.ceiling <= granted {
			granted, limited = c.ceiling, deadline.LimitCeiling
		}
		limit := now + granted
		if n == 1 {
			deposited = true // at time 0: a first attempt starts at once
		}
		res.Attempts = n
		res.Granted = append(res.Granted, granted)
		res.Limited = append(res.Limited, limited)

		// When the op returns, and whether with the context's error. A
		// cooperative op whose context would end within its duration waits
		// for the end; one that fits returns at its duration unless the
		// caller cancels first.
		op := c.ops[n-1]
		ret, ctxErr := now+op.dur, false
		if op.coop {
			switch {
			case ret >= limit:
				ret, ctxErr = min(limit, cancel), true
			case cancel < ret:
				ret, ctxErr = cancel, true
			}
		}
		if !ctxErr && op.outcome == opOK {
			res.Ended = append(res.Ended, deadline.EndedCompleted)
			return stop(deadline.ReasonSuccess, ret)
		}

		// What ended the failed attempt: whichever came first of the
		// caller's cancellation, the op's own return and the attempt's limit
		// (the limit wins a tie with the op's return; a cooperative op
		// returns at the cancellation itself).
		var ended deadline.EndedBy
		switch {
		case cancel <= ret && cancel < limit:
			ended = deadline.EndedCanceled
		case ret < limit:
			ended = deadline.EndedError
		case limited == deadline.LimitCeiling:
			ended = deadline.EndedAttemptTimeout
		default:
			ended = deadline.EndedDeadline
		}
		res.Ended = append(res.Ended, ended)
		switch ended {
		case deadline.EndedCanceled:
			return stop(deadline.ReasonCanceled, ret)
		case deadline.EndedDeadline:
			res.DeadlineCuts++
			return stop(deadline.ReasonDeadline, ret)
		case deadline.EndedAttemptTimeout:
			res.CeilingTimeouts++
		}

		// Retry? An attempt timeout is retryable; otherwise the op's error
		// decides (only the marked ones are).
		retryable := ended == deadline.EndedAttemptTimeout || op.outcome == opRetryable || op.outcome == opRetryAfter
		if !retryable {
			return stop(deadline.ReasonNotRetryable, ret)
		}
		if n >= c.maxAttempts {
			return stop(deadline.ReasonExhausted, ret)
		}
		wait, asked := c.delay(n), !ctxErr && op.outcome == opRetryAfter
		if asked {
			wait = op.retryAfter
		}
		if wait > 0 && wait >= end-ret-c.floor {
			if asked {
				return stop(deadline.ReasonRetryAfterTooLong, ret)
			}
			return stop(deadline.ReasonBackoffTooLong, ret)
		}
		// The retry budget is asked for a retry that fits, before the
		// sleep.
		if rb.window > 0 {
			if rb.balance(ret, deposited, taken) < 1 {
				return stop(deadline.ReasonRetryBudget, ret)
			}
			taken = append(taken, ret)
		}
		if wait > 0 && cancel < ret+wait {
			return stop(deadline.ReasonCanceled, max(ret, cancel))
		}
		now = ret + wait
	}
}

// balance is the retries the budget allows at instant at (since it was
// built): ratio × the first attempts counted + minRate × window, rounded
// down, less the retries taken and the charge, counting only what happened
// in the buckets of the window that ends in at's bucket (a bucket is a
// tenth of the window; the deposit and the charge are at instant 0).
func (b propBudget) balance(at time.Duration, deposited bool, taken []time.Duration) int {
	bucket := b.window / 10
	inWindow := func(t time.Duration) bool { return at/bucket-t/bucket < 10 }
	dep, wd := 0, 0
	if inWindow(0) {
		wd = b.charge
		if deposited {
			dep = 1
		}
	}
	for _, t := range taken {
		if inWindow(t) {
			wd++
		}
	}
	// In 4000ths of a retry: quarters × dep / 4 + minRate × window ms / 1000.
	allow := (b.quarters*dep*1000 + b.minRate*int(b.window/time.Millisecond)*4) / 4000
	return allow - wd
}

// delay is the documented backoff: cap = min(Max, Base·2^(n-1)); full
// jitter draws in [0, cap], equal in [cap/2, cap], none sleeps cap.
func (c propCase) delay(n int) time.Duration {
	b := c.backoff
	if b.Base == 0 {
		return 0
	}
	cp := b.Base
	for range n - 1 {
		cp = min(2*cp, b.Max)
	}
	cp = min(cp, b.Max)
	switch b.Jitter {
	case deadline.JitterNone:
		return cp
	case deadline.JitterEqual:
		return cp/2 + time.Duration(c.rand(int64(cp-cp/2)+1))
	}
	return time.Duration(c.rand(int64(cp) + 1))
}

// modelVerdict is the documented verdict, first rule that applies.
func modelVerdict(reason deadline.Reason, ceilingTimeouts int) deadline.Verdict {
	switch {
	case reason == deadline.ReasonSuccess:
		return deadline.VerdictOK
	case reason == deadline.ReasonCanceled:
		return deadline.VerdictCanceled
	case reason == deadline.ReasonRetryAfterTooLong:
		return deadline.VerdictThrottled
	case reason == deadline.ReasonRetryBudget:
		return deadline.VerdictRetriesThrottled
	case ceilingTimeouts > 0:
		return deadline.VerdictTooSlow
	case reason == deadline.ReasonDeadline, reason == deadline.ReasonRefused, reason == deadline.ReasonBackoffTooLong:
		return deadline.VerdictDeadlineTooSmall
	}
	return deadline.VerdictFailed
}

// run runs the case through Do inside the current synctest bubble and
// returns what the engine and its hooks reported.
func (c propCase) run() (propResult, error) {
	var res propResult
	var calls []deadline.CallResult
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if c.ctxLimit > 0 {
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithDeadline(ctx, start.Add(c.ctxLimit))
		defer cancelT()
	}
	if c.cancelAt > 0 {
		defer time.AfterFunc(c.cancelAt, cancel).Stop()
	}
	var rb *deadline.RetryBudget
	if b := c.retryBudget; b.window > 0 {
		var err error
		rb, err = deadline.NewRetryBudget(deadline.WithRetryWindow(b.window),
			deadline.WithRetryRatio(float64(b.quarters)/4), deadline.WithMinRetryRate(float64(b.minRate)))
		if err != nil {
			return res, err
		}
		rb.Charge(b.charge)
	}
	p := deadline.Policy{
		RetryBudget: rb,
		Name:        "prop", MaxAttempts: c.maxAttempts, AttemptTimeout: c.ceiling, Floor: c.floor,
		Backoff: c.backoff, Rand: c.rand,
		Hooks: &deadline.Hooks{
			AttemptEnd: func(_ context.Context, a deadline.AttemptInfo, r deadline.AttemptResult) {
				res.Granted = append(res.Granted, a.Granted)
				res.Limited = append(res.Limited, a.LimitedBy)
				res.Ended = append(res.Ended, r.EndedBy)
			},
			CallEnd: func(_ context.Context, r deadline.CallResult) { calls = append(calls, r) },
		},
	}
	op := func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
		o := c.ops[a.Number-1]
		if o.coop {
			if dl, ok := ctx.Deadline(); ok && !time.Now().Add(o.dur).Before(dl) {
				<-ctx.Done() // the context ends first (or together): wait for it
				return 0, ctx.Err()
			}
			t := time.NewTimer(o.dur)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		} else {
			time.Sleep(o.dur)
		}
		switch o.outcome {
		case opOK:
			return a.Number, nil
		case opRetryable:
			return 0, deadline.Retryable(errFlaky)
		case opFatal:
			return 0, errFatal
		}
		return 0, deadline.Retryable(deadline.RetryAfter(err503, o.retryAfter))
	}
	_, err := deadline.Do(ctx, deadline.New(c.budget), p, op)
	res.Elapsed = time.Since(start)
	if len(calls) != 1 {
		return res, fmt.Errorf("%d CallEnd hooks, want 1", len(calls))
	}
	r := calls[0]
	res.Reason, res.Attempts, res.Remaining = r.Reason, r.Attempts, r.Remaining
	res.CeilingTimeouts, res.DeadlineCuts = r.CeilingTimeouts, r.DeadlineCuts
	res.Verdict = deadline.VerdictOf(r)
	switch se := stopErr(err); {
	case r.Reason == deadline.ReasonSuccess && err != nil:
		return res, fmt.Errorf("success reported, Do returned %v", err)
	case r.Reason != deadline.ReasonSuccess && (se == nil || se.Reason != r.Reason || se.Attempts != r.Attempts):
		return res, fmt.Errorf("CallEnd says %v after %d attempts, Do returned %v", r.Reason, r.Attempts, err)
	}
	return res, nil
}

// TestDoProperty checks Do against the model on propBubbles*propPerBubble
// random cases. Each bubble is a subtest: synctest.Test ends a failed test
// with FailNow, and the other bubbles should still run.
func TestDoProperty(t *testing.T) {
	ran, failures, budgeted, denied := 0, 0, 0, 0
	for b := range propBubbles {
		first := b * propPerBubble
		t.Run(fmt.Sprintf("cases %d-%d", first, first+propPerBubble-1), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				for i := first; i < first+propPerBubble && failures < 10; i++ {
					ran++
					c := genPropCase(i)
					if c.retryBudget.window > 0 {
						budgeted++
						if c.model().Reason == deadline.ReasonRetryBudget {
							denied++
						}
					}
					if !checkPropCase(t, c) {
						t.Logf("case %d (seed %#x)", i, propSeed)
						failures++
					}
				}
			})
		})
	}
	t.Logf("%d cases, %d disagreed with the model; %d with a retry budget, %d of them denied a retry", ran, failures, budgeted, denied)
	assert.Greater(t, denied, ran/50, "too few cases exercise a denial")
}

// TestDoPropertyRegressions replays cases the property test found.
func TestDoPropertyRegressions(t *testing.T) {
	const ms = time.Millisecond
	cases := []propCase{
		// The classify bug: an attempt that its ceiling ended, returning
		// after the caller's deadline, was counted as a deadline cut.
		{budget: 100 * ms, ctxLimit: 100 * ms, ceiling: 50 * ms, maxAttempts: 2,
			ops: [4]propOp{{dur: 200 * ms, outcome: opRetryable}}},
		// The tie: the ceiling equals what is left; it bound the grant.
		{budget: time.Second, ctxLimit: 100 * ms, ceiling: 100 * ms, maxAttempts: 1,
			ops: [4]propOp{{dur: 300 * ms, coop: true, outcome: opRetryable}}},
		// The caller canceled after the ceiling ended the attempt, before
		// the op (ignoring its context) returned: a ceiling timeout, then
		// canceled.
		{budget: 600 * ms, cancelAt: 449*ms + 1, ceiling: 217 * ms, maxAttempts: 2,
			backoff: deadline.Backoff{Base: 8 * ms, Max: 168 * ms, Jitter: deadline.JitterEqual}, draw: 8985001070929370325,
			ops: [4]propOp{{dur: 748 * ms, outcome: opRetryable}, {dur: 217 * ms, outcome: opOK}}},
		// The op returned its own error at the very instant its ceiling was
		// reached: the ceiling ended it.
		{budget: 550 * ms, ceiling: 4 * ms, maxAttempts: 2,
			backoff: deadline.Backoff{Base: 46 * ms, Max: 228 * ms, Jitter: deadline.JitterEqual}, draw: 6792876625694671860,
			ops: [4]propOp{{dur: 4 * ms, outcome: opRetryable}, {dur: 4 * ms, outcome: opOK}}},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkPropCase(t, c) })
		})
	}
}

// checkPropCase runs c and reports whether the engine agreed with the model.
func checkPropCase(t *testing.T, c propCase) bool {
	t.Helper()
	want := c.model()
	got, err := c.run()
	if err == nil && assert.ObjectsAreEqual(want, got) {
		return true
	}
	t.Errorf("case %v\n got: %+v (%v)\nwant: %+v", c, got, err, want)
	return false
}
