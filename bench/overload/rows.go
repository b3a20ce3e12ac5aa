package overload

import (
	"context"
	"errors"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
)

// Row names, as printed in the tables.
const (
	NoLimiter     = "no limiter"
	Oracle        = "oracle (knows each call's service time and the queue)"
	FailsafeAL    = "failsafe-go adaptivelimiter"
	FailsafeALQ   = "failsafe-go adaptivelimiter + queueing"
	FailsafeAT    = "failsafe-go adaptivethrottler"
	FailsafeCB    = "failsafe-go circuitbreaker"
	Gradient2     = "Netflix Gradient2 (windowed)"
	Vegas         = "Netflix Vegas"
	EnvoyGradient = "Envoy adaptive concurrency (gradient controller)"
	FixedLimit    = "fixed limit = the workers, waiting FIFO while the service time fits (reference)"
)

// Rows returns every row of issue 31's models, in the order of the
// tables. Each call returns new rows; each run builds its own Caller.
func Rows() []Row {
	return append(append(references(), peers()...), thisRows()...)
}

// UniformRows returns the rows of the uniform-budget model ([Uniform]): no
// limiter, the fixed limit every row is measured against, the peers, and
// this project through Do with DefaultPolicy and a Limiter.
func UniformRows() []Row {
	rows := references()[:1]
	rows = append(rows, Row{Name: FixedLimit, Config: "a client-side semaphore of as many permits as the downstream has workers (10); " +
		"a call over the limit waits for a permit in FIFO order while its remaining budget is at least the route's median service time (20ms, " +
		"which is every call's in this model), then gives up: what an operator who knows the downstream would configure",
		New: newFixedLimit})
	return append(append(rows, peers()...), thisUniformRows()...)
}

// references returns the rows every other row is read against.
func references() []Row {
	return []Row{
		{Name: NoLimiter, Config: "every call sent once, as it comes",
			New: func(Env) (Caller, error) {
				return CallerFunc(func(ctx context.Context, _ Call, send Send) error { return send(ctx) }), nil
			}},
		{Name: Oracle, Config: "sends a call only if, given the queue ahead of it and its own service time, its answer arrives before its deadline; " +
			"the physical limit, not a client: it turns slow calls away, so it can exceed 100% of the nominal capacity",
			New: func(env Env) (Caller, error) {
				return CallerFunc(func(ctx context.Context, c Call, _ Send) error {
					return env.Peek(ctx, c, func(done time.Time) bool { return !done.After(c.Deadline) })
				}), nil
			}},
	}
}

// peers returns the peers' rows.
func peers() []Row {
	return []Row{
		{Name: FailsafeAL, Config: "failsafe.With(adaptivelimiter.NewBuilder[any]().Build()): its defaults (limits 1..200, initial 20, " +
			"max limit factor 5, recent window 1s..30s/50 samples, p90, baseline window 10, correlation window 50), no queueing: over the limit, ErrExceeded at once",
			New: func(Env) (Caller, error) {
				return failsafeCaller(failsafe.With[any](adaptivelimiter.NewBuilder[any]().Build())), nil
			}},
		{Name: FailsafeALQ, Config: "failsafe.With(adaptivelimiter.NewBuilder[any]().WithQueueing(2, 3).Build()): its defaults, and a call " +
			"over the limit waits for a permit (until its context ends), queued up to 2× the limit, then rejected gradually up to 3× " +
			"(the factors its priority limiter defaults to)",
			New: func(Env) (Caller, error) {
				return failsafeCaller(failsafe.With[any](adaptivelimiter.NewBuilder[any]().WithQueueing(2, 3).Build())), nil
			}},
		{Name: FailsafeAT, Config: "failsafe.With(adaptivethrottler.NewBuilder[any]().Build()): its defaults (SRE client-side throttling: " +
			"rejects with a probability that grows as the success rate over 1 minute falls below 90%, at most 90%); every error is a failure",
			New: func(Env) (Caller, error) {
				return failsafeCaller(failsafe.With[any](adaptivethrottler.NewBuilder[any]().Build())), nil
			}},
		{Name: FailsafeCB, Config: "failsafe.With(circuitbreaker.NewBuilder[any]().WithFailureRateThreshold(0.5, 20, 10s).WithDelay(5s)." +
			"WithSuccessThreshold(5).Build()): opens when half of at least 20 calls in 10s fail (every error a failure), half-open after 5s, " +
			"closed again after 5 successes",
			New: func(Env) (Caller, error) {
				return failsafeCaller(failsafe.With[any](circuitbreaker.NewBuilder[any]().
					WithFailureRateThreshold(0.5, 20, 10*time.Second).WithDelay(5 * time.Second).WithSuccessThreshold(5).Build())), nil
			}},
		{Name: Gradient2, Config: gradient2Config,
			New: func(Env) (Caller, error) { return newSimpleLimiter(newWindowed(newGradient2())), nil }},
		{Name: Vegas, Config: vegasConfig,
			New: func(Env) (Caller, error) { return newSimpleLimiter(newVegas()), nil }},
		{Name: EnvoyGradient, Config: envoyConfig,
			New: func(Env) (Caller, error) { return newEnvoy(), nil }},
	}
}

// newFixedLimit builds the FixedLimit row's caller for one run.
func newFixedLimit(env Env) (Caller, error) {
	m := env.Model
	sem := make(chan struct{}, m.Workers) // a channel's senders wait in FIFO order
	need := m.Routes[0].Median
	return CallerFunc(func(ctx context.Context, c Call, send Send) error {
		wait, cancel := context.WithDeadline(ctx, c.Deadline.Add(-need))
		defer cancel()
		select {
		case sem <- struct{}{}:
		case <-wait.Done():
			return errLimited
		}
		defer func() { <-sem }()
		return send(ctx)
	}), nil
}

// failsafeCaller runs each call through exec, failsafe-go's own executor,
// with the call's context: a call still waiting or running when its
// deadline passes is canceled, and the limiter's permit dropped, by
// failsafe-go itself.
func failsafeCaller(exec failsafe.Executor[any]) Caller {
	return CallerFunc(func(ctx context.Context, _ Call, send Send) error {
		return exec.WithContext(ctx).RunWithExecution(func(e failsafe.Execution[any]) error {
			return send(e.Context())
		})
	})
}

// errLimited is a Netflix or Envoy limiter's refusal.
var errLimited = errors.New("overload: refused by the limiter")
