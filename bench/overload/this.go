package overload

import (
	"context"
	"errors"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// OverloadCharge is the tokens the ThisToday row charges its retry budget
// per 503, as deadlinehttp.WithOverloadCharge does (the outage model's
// choice).
const OverloadCharge = 5

// thisTodayConfig describes the ThisToday row.
const thisTodayConfig = "deadline.Do(ctx, deadline.FromContext(ctx), Policy{Name: the call's route, MaxAttempts 3, Floor 5ms, " +
	"Backoff{10ms, 40ms, full jitter}, RetryBudget: deadline.NewRetryBudget() (shared; every 503 charges it 5 more tokens, as " +
	"deadlinehttp.WithOverloadCharge(5)), LearnedFloor{(*learn.Recorder).Live(Max 1s, MinSamples 20, Every 5, HalfLife 40), Threshold 0.05, " +
	"ProbeShare 0.1}, the recorder's hooks}); a 503 is retryable, a budget refusal is not; against the downstream with this project's " +
	"server admission (" + AdmissionConfig + ")"

// thisToday is this project without the new parts of issue 31: the
// client's retry budget with the overload charge and its learned floor,
// the server's admission queue with learned admission.
type thisToday struct {
	budget *deadline.RetryBudget
	rec    learn.Recorder
	live   *learn.Live
}

func newThisToday(Env) (Caller, error) {
	t := &thisToday{}
	var err error
	if t.budget, err = deadline.NewRetryBudget(); err != nil {
		return nil, err
	}
	if t.live, err = t.rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 20}, Every: 5, HalfLife: 40}); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *thisToday) Call(ctx context.Context, c Call, send Send) error {
	d, ok := deadline.FromContext(ctx)
	if !ok {
		return errors.New("overload: the call's context carries no deadline")
	}
	p := deadline.Policy{
		Name: c.Route, MaxAttempts: 3, Floor: 5 * time.Millisecond,
		Backoff:     deadline.Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond, Jitter: deadline.JitterFull},
		RetryBudget: t.budget, Hooks: t.rec.Hooks(),
		LearnedFloor: &deadline.LearnedFloor{Estimator: t.live, Threshold: 0.05, ProbeShare: 0.1},
	}
	_, err := deadline.Do(ctx, d, p, func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
		err := send(ctx)
		if errors.Is(err, ErrOverloaded) {
			t.budget.Charge(OverloadCharge)
			return struct{}{}, deadline.Retryable(err)
		}
		return struct{}{}, err
	})
	return err
}
