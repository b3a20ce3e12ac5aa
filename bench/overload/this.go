package overload

// This file is every use of this project's API by the rows (package
// deadline, deadline/overload and deadline/learn; the downstream's admission is in
// simulate.go): when that API moves, the rows are adapted here.

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	ov "github.com/deadlinebudget/budget/deadline/overload"
)

// Names of this project's rows.
const (
	ThisNew       = "deadline (this), with the new parts"
	ThisNewClient = "deadline (this), with the new parts, client only (plain downstream)"

	// The uniform-budget model's rows: Do with DefaultPolicy and a
	// Limiter, as issue 38 found the collapse.
	ThisDefault      = "deadline (this): Do(DefaultPolicy) + NewLimiter(), client only"
	ThisDefaultBT    = "deadline (this): Do(DefaultPolicy) + NewLimiter(breaker) + throttle, client only"
	ThisDefaultWhole = "deadline (this): Do(DefaultPolicy) + NewLimiter(breaker) + throttle, behind the server admission"
)

// OverloadCharge is the tokens this project's rows charge their retry
// budget per 503, as deadlinehttp.WithOverloadCharge does (the outage
// model's choice).
const OverloadCharge = 5

// ThrottleK is the client-side throttling's K in the rows with the new
// parts: the SRE book's 2.
const ThrottleK = 2

// thisSpec is one of this project's rows: what its client is made of.
type thisSpec struct {
	// policy is the policy of a call of route; the caller adds the
	// limiter, the retry budget, the learned floor and the hooks.
	policy       func(route string) deadline.Policy
	limiter      bool // Policy.Limiter: overload.NewLimiter(opts...)
	breaker      bool // the limiter with overload.WithBreaker()
	budget       bool // Policy.RetryBudget: deadline.NewRetryBudget()
	throttle     bool // Policy.Throttle: overload.NewThrottle(WithThrottleK(ThrottleK)), charged with the budget
	learnedFloor bool // Policy.LearnedFloor on a live estimator
}

// tuned is the policy of issue 31's rows: up to 3 attempts, short backoff.
func tuned(route string) deadline.Policy {
	return deadline.Policy{Name: route, MaxAttempts: 3, Floor: 5 * time.Millisecond,
		Backoff: deadline.Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond, Jitter: deadline.JitterFull}}
}

// defaults is deadline.DefaultPolicy, named by the route.
func defaults(route string) deadline.Policy {
	p := deadline.DefaultPolicy()
	p.Name = route
	return p
}

const (
	tunedConfig = "deadline.Do(ctx, deadline.FromContext(ctx), Policy{Name: the call's route, MaxAttempts 3, Floor 5ms, Backoff{10ms, 40ms, full jitter}"
	floorConfig = "LearnedFloor{(*learn.Recorder).Live(Max 1s, MinSamples 20, Every 5, HalfLife 40), Threshold 0.05, ProbeShare 0.1}, the recorder's hooks"
	// thisNewConfig describes the rows with the new parts.
	thisNewConfig = tunedConfig + ", Limiter: overload.NewLimiter(WithBreaker()) (one for the downstream, shared by the routes, its defaults: " +
		"adaptive limit, waiting only while the call can still finish), RetryBudget: deadline.NewRetryBudget(), Throttle: overload.NewThrottle() (shared; every 503 " +
		"marked deadline.Overloaded and charging both 5 tokens, as deadlinehttp.WithOverloadCharge(5), but a 503 shedding a request from the server's standing " +
		"queue (Deadline-Refused reason=standing_queue) marked deadline.Shed: not charged, not counted by the throttle, as deadlinehttp's Transport does), " + floorConfig + "}); a 503 is retryable, a budget refusal is not"
	defaultConfig = "deadline.Do(ctx, deadline.FromContext(ctx), deadline.DefaultPolicy() (3 attempts, Floor 20ms, Backoff 50ms..400ms) with Name: the call's route"
)

// thisRows returns this project's rows of issue 31's models. (Issue 31's
// row without the limiter and the throttle, "deadline (this), without the
// new parts", is no longer run: it cost a sixth of the run's time and
// answers a question issue 31 settled.)
func thisRows() []Row {
	all := thisSpec{policy: tuned, limiter: true, breaker: true, budget: true, throttle: true, learnedFloor: true}
	return []Row{
		{Name: ThisNew, Config: thisNewConfig + "; against the downstream with this project's server admission (" + AdmissionConfig + ")",
			Admission: true, New: all.new},
		{Name: ThisNewClient, Config: thisNewConfig + "; against the plain downstream (its queue), as the peers' rows", New: all.new},
	}
}

// thisUniformRows returns this project's rows of the uniform-budget model.
func thisUniformRows() []Row {
	plain := thisSpec{policy: defaults, limiter: true}
	all := thisSpec{policy: defaults, limiter: true, breaker: true, budget: true, throttle: true}
	const bt = ", Limiter: overload.NewLimiter(WithBreaker()), RetryBudget: deadline.NewRetryBudget(), Throttle: overload.NewThrottle() (shared; a 503 " +
		"marked deadline.Overloaded, charging both 5 tokens; a shed from the server's standing queue marked deadline.Shed, not charged)"
	return []Row{
		{Name: ThisDefault, Config: defaultConfig + ", Limiter: overload.NewLimiter() (its defaults, no breaker), no retry budget; against the plain downstream",
			New: plain.new},
		{Name: ThisDefaultBT, Config: defaultConfig + bt + "; against the plain downstream", New: all.new},
		{Name: ThisDefaultWhole, Config: defaultConfig + bt + "; against the downstream with this project's server admission (" + AdmissionConfig + ")",
			Admission: true, New: all.new},
	}
}

// thisCaller is one run's client of one of this project's rows: one
// limiter for the downstream (shared by the routes, as overload.Limiter
// recommends: limiters per route sharing a downstream each see the others'
// queueing as their own; the policies' Names keep the routes' latencies
// apart), one retry budget, one learned floor.
type thisCaller struct {
	spec   thisSpec
	seed   uint64 // the model's: each call's Policy.Rand derives from it
	lim    *ov.Limiter
	budget *deadline.RetryBudget
	thr    *ov.Throttle
	rec    learn.Recorder
	live   *learn.Live
}

func (s thisSpec) new(env Env) (Caller, error) {
	t := &thisCaller{spec: s, seed: env.Model.Seed}
	var err error
	if s.limiter {
		var opts []ov.Option
		if s.breaker {
			opts = append(opts, ov.WithBreaker())
		}
		if t.lim, err = ov.NewLimiter(opts...); err != nil {
			return nil, err
		}
	}
	if s.budget {
		if t.budget, err = deadline.NewRetryBudget(); err != nil {
			return nil, err
		}
	}
	if s.throttle {
		if t.thr, err = ov.NewThrottle(ov.WithThrottleK(ThrottleK)); err != nil {
			return nil, err
		}
	}
	if s.learnedFloor {
		if t.live, err = t.rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 20}, Every: 5, HalfLife: 40}); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *thisCaller) Call(ctx context.Context, c Call, send Send) error {
	d, ok := deadline.FromContext(ctx)
	if !ok {
		return errors.New("overload: the call's context carries no deadline")
	}
	p := t.spec.policy(c.Route)
	// The call's own source for its jitter, throttle and probe draws,
	// seeded by the model's seed and the call's index: a seed gives the
	// same draws to the same call whatever the goroutines' order, so a
	// run repeats (the global source made one seed's cell differ from run
	// to run). Policy.Rand must be safe for concurrent use when the Policy
	// is shared; this one is the call's alone.
	p.Rand = rand.New(rand.NewPCG(t.seed, uint64(c.Index))).Int64N
	if t.lim != nil {
		p.Limiter = t.lim
	}
	if t.budget != nil {
		p.RetryBudget = t.budget
	}
	if t.thr != nil {
		p.Throttle = t.thr
	}
	if t.live != nil {
		p.Hooks = t.rec.Hooks()
		p.LearnedFloor = &deadline.LearnedFloor{Estimator: t.live, Threshold: 0.05, ProbeShare: 0.1}
	}
	_, err := deadline.Do(ctx, d, p, func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
		err := send(ctx)
		switch {
		case errors.Is(err, ErrShed): // as deadlinehttp's Transport: not charged, not counted by the throttle
			return struct{}{}, deadline.Retryable(deadline.Shed(err))
		case errors.Is(err, ErrOverloaded):
			if t.budget != nil {
				t.budget.Charge(OverloadCharge)
			}
			if t.thr != nil {
				t.thr.Charge(OverloadCharge)
			}
			return struct{}{}, deadline.Retryable(deadline.Overloaded(err))
		}
		return struct{}{}, err
	})
	return err
}
