package overload

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// Names of this project's rows with the new parts of issue 31.
const (
	ThisNew       = "deadline (this), with the new parts"
	ThisNewClient = "deadline (this), with the new parts, client only (plain downstream)"
)

// ThrottleK is the client-side throttling's K in the rows with the new
// parts: the SRE book's 2.
const ThrottleK = 2

// thisNewConfig describes the rows with the new parts.
const thisNewConfig = "deadline.Do(ctx, deadline.FromContext(ctx), Policy{Name: the call's route, MaxAttempts 3, Floor 5ms, " +
	"Backoff{10ms, 40ms, full jitter}, Limiter: deadline.NewLimiter(WithBreaker(deadline.DefaultBreaker())) (one for the downstream, shared by the routes, its defaults: " +
	"adaptive limit, waiting only while the call can still finish), RetryBudget: deadline.NewRetryBudget(WithThrottle(2)) (shared; every 503 " +
	"marked deadline.Overloaded and charging 5 tokens, as deadlinehttp.WithOverloadCharge(5)), LearnedFloor{(*learn.Recorder).Live(Max 1s, " +
	"MinSamples 20, Every 5, HalfLife 40), Threshold 0.05, ProbeShare 0.1}, the recorder's hooks}); a 503 is retryable, a budget refusal is not"

// thisNewRows returns this project's rows with the new parts: against the
// downstream with server admission (the whole project), and the client
// alone against the plain downstream the peers call.
func thisNewRows() []Row {
	return []Row{
		{Name: ThisNew, Config: thisNewConfig + "; against the downstream with this project's server admission (" + AdmissionConfig + ")",
			Admission: true, New: newThisNew},
		{Name: ThisNewClient, Config: thisNewConfig + "; against the plain downstream (its FIFO queue), as the peers' rows",
			New: newThisNew},
	}
}

// thisNew is this project with the new parts: a limiter (with its
// breaker) per route, the retry budget with client-side throttling and the
// overload charge, the learned floor.
type thisNew struct {
	budget *deadline.RetryBudget
	rec    learn.Recorder
	live   *learn.Live

	mu  sync.Mutex
	lim *deadline.Limiter // the downstream's, made on the first call
}

func newThisNew(Env) (Caller, error) {
	t := &thisNew{}
	var err error
	if t.budget, err = deadline.NewRetryBudget(deadline.WithThrottle(ThrottleK)); err != nil {
		return nil, err
	}
	if t.live, err = t.rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 20}, Every: 5, HalfLife: 40}); err != nil {
		return nil, err
	}
	return t, nil
}

// limiter returns the downstream's limiter, made on the first call: one
// for every route, as deadline.Limiter recommends (limiters per route
// sharing a downstream each see the others' queueing as their own, and
// the slow route's, whose latency moves least, takes the downstream).
// The policies' Names (the routes) keep the routes' latencies apart.
func (t *thisNew) limiter() (*deadline.Limiter, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lim != nil {
		return t.lim, nil
	}
	l, err := deadline.NewLimiter(deadline.WithBreaker(deadline.DefaultBreaker()))
	if err != nil {
		return nil, err
	}
	t.lim = l
	return l, nil
}

func (t *thisNew) Call(ctx context.Context, c Call, send Send) error {
	d, ok := deadline.FromContext(ctx)
	if !ok {
		return errors.New("overload: the call's context carries no deadline")
	}
	l, err := t.limiter()
	if err != nil {
		return err
	}
	p := deadline.Policy{
		Name: c.Route, MaxAttempts: 3, Floor: 5 * time.Millisecond,
		Backoff:     deadline.Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond, Jitter: deadline.JitterFull},
		RetryBudget: t.budget, Hooks: t.rec.Hooks(), Limiter: l,
		LearnedFloor: &deadline.LearnedFloor{Estimator: t.live, Threshold: 0.05, ProbeShare: 0.1},
	}
	_, err = deadline.Do(ctx, d, p, func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
		err := send(ctx)
		if errors.Is(err, ErrOverloaded) {
			t.budget.Charge(OverloadCharge)
			return struct{}{}, deadline.Retryable(deadline.Overloaded(err))
		}
		return struct{}{}, err
	})
	return err
}
