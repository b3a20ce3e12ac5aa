package deadline_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

var (
	errFlaky = errors.New("flaky") // a transient failure, marked Retryable where used
	errFatal = errors.New("fatal") // a permanent failure
	err503   = errors.New("503 Service Unavailable")
)

// maxRand is a deterministic Rand that always draws the top of the range, so
// full jitter sleeps exactly the cap.
func maxRand(n int64) int64 { return n - 1 }

// zeroRand always draws 0: full jitter never sleeps, equal jitter sleeps cap/2.
func zeroRand(int64) int64 { return 0 }

// hang blocks until its context ends and returns the context's error.
func hang(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// attemptLog records what each attempt saw, safe for the single goroutine Do
// runs op on and for readers after Do returns.
type attemptLog struct {
	mu       sync.Mutex
	infos    []deadline.AttemptInfo
	starts   []time.Time
	causes   []error
	ctxs     []context.Context
	deadline []time.Time
}

func (l *attemptLog) record(ctx context.Context, a deadline.AttemptInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.infos = append(l.infos, a)
	l.starts = append(l.starts, time.Now())
	l.ctxs = append(l.ctxs, ctx)
	dl, _ := ctx.Deadline()
	l.deadline = append(l.deadline, dl)
}

func (l *attemptLog) cause(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.causes = append(l.causes, context.Cause(ctx))
}

// gaps returns the virtual time between consecutive attempt starts.
func (l *attemptLog) gaps() []time.Duration {
	var g []time.Duration
	for i := 1; i < len(l.starts); i++ {
		g = append(g, l.starts[i].Sub(l.starts[i-1]))
	}
	return g
}

// script returns an op that records each attempt and then behaves as the
// attempt's entry in steps says (the last entry repeats): "ok" returns the
// attempt number, "hang" waits for the context, anything else is returned as
// the error the function gives.
func script(l *attemptLog, steps ...func(ctx context.Context, a deadline.AttemptInfo) (int, error)) func(context.Context, deadline.AttemptInfo) (int, error) {
	return func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
		l.record(ctx, a)
		i := min(a.Number, len(steps)) - 1
		v, err := steps[i](ctx, a)
		if ctx.Err() != nil {
			l.cause(ctx)
		}
		return v, err
	}
}

func ok(_ context.Context, a deadline.AttemptInfo) (int, error) { return a.Number, nil }

func fail(err error) func(context.Context, deadline.AttemptInfo) (int, error) {
	return func(context.Context, deadline.AttemptInfo) (int, error) { return 0, err }
}

// after returns an op step that takes dur and then returns err. Only tests
// that run inside a testing/synctest bubble use it, so dur is virtual time.
func after(dur time.Duration, err error) func(context.Context, deadline.AttemptInfo) (int, error) {
	return func(_ context.Context, a deadline.AttemptInfo) (int, error) {
		time.Sleep(dur)
		if err != nil {
			return 0, err
		}
		return a.Number, nil
	}
}

// policy returns a policy with no backoff and the given attempts, ceiling
// and floor.
func policy(attempts int, ceiling, floor time.Duration) deadline.Policy {
	return deadline.Policy{Name: "step", MaxAttempts: attempts, AttemptTimeout: ceiling, Floor: floor}
}

// recorder is a Hooks implementation that writes every event as a line.
type recorder struct {
	mu      sync.Mutex
	events  []string
	calls   []deadline.CallResult
	ends    []deadline.AttemptResult
	backoff []deadline.BackoffInfo
	starts  []deadline.CallInfo
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) hooks(tag string) *deadline.Hooks {
	return &deadline.Hooks{
		CallStart: func(ctx context.Context, c deadline.CallInfo) context.Context {
			r.add(tag + "CallStart")
			r.mu.Lock()
			r.starts = append(r.starts, c)
			r.mu.Unlock()
			return nil
		},
		AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
			r.add(tag + "AttemptStart " + itoa(a.Number))
			return nil
		},
		AttemptEnd: func(ctx context.Context, a deadline.AttemptInfo, res deadline.AttemptResult) {
			r.add(tag + "AttemptEnd " + itoa(a.Number) + " " + res.EndedBy.String())
			r.mu.Lock()
			r.ends = append(r.ends, res)
			r.mu.Unlock()
		},
		Backoff: func(ctx context.Context, b deadline.BackoffInfo) {
			r.add(tag + "Backoff " + itoa(b.Attempt) + " " + b.Source.String())
			r.mu.Lock()
			r.backoff = append(r.backoff, b)
			r.mu.Unlock()
		},
		CallEnd: func(ctx context.Context, res deadline.CallResult) {
			r.add(tag + "CallEnd " + res.Reason.String())
			r.mu.Lock()
			r.calls = append(r.calls, res)
			r.mu.Unlock()
		},
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// stopErr asserts err is a *StopError and returns it.
func stopErr(err error) *deadline.StopError {
	se, _ := errors.AsType[*deadline.StopError](err)
	return se
}
