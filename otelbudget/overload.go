package otelbudget

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/deadlinebudget/budget/deadline/overload"
)

// The overload gauges ([Observer.ObserveOverload]): the state of one
// downstream's overload control, read when the SDK collects, each with the
// attribute [AttrDownstream].
const (
	// MetricLimiterLimit is how many calls the limiter runs at once now
	// (gauge, {call}).
	MetricLimiterLimit = "deadline.limiter.limit"
	// MetricLimiterInFlight is how many calls hold a slot now (gauge,
	// {call}).
	MetricLimiterInFlight = "deadline.limiter.in_flight"
	// MetricLimiterQueued is how many calls wait for a slot now (gauge,
	// {call}).
	MetricLimiterQueued = "deadline.limiter.queued"
	// MetricBreakerState is the limiter's breaker's state: 0 closed, 1
	// open, 2 half-open, with the attribute [AttrBreakerState] naming it
	// (gauge, 1). Absent without a breaker.
	MetricBreakerState = "deadline.breaker.state"
	// MetricThrottleDropProbability is the probability that client-side
	// throttling drops a request now, in [0, 1] (gauge, 1).
	MetricThrottleDropProbability = "deadline.throttle.drop_probability"
	// MetricBreakerTransitions counts the breaker's changes of state
	// (counter, {transition}; attributes [AttrDownstream],
	// [AttrBreakerFrom] and [AttrBreakerState], the new state), through
	// [Observer.BreakerTransitions].
	MetricBreakerTransitions = "deadline.breaker.transitions"
)

// The overload gauges' attributes.
const (
	// AttrDownstream names the downstream whose overload control a gauge
	// reports (the name given to [Observer.ObserveOverload]).
	AttrDownstream = attribute.Key("deadline.downstream")
	// AttrBreakerState is the breaker's state on [MetricBreakerState]:
	// "closed", "open" or "half_open" ([overload.State]'s String).
	AttrBreakerState = attribute.Key("deadline.breaker.state")
	// AttrBreakerFrom is the state a breaker left, on
	// [MetricBreakerTransitions].
	AttrBreakerFrom = attribute.Key("deadline.breaker.from")
)

// ObserveOverload exports the state of one downstream's overload control,
// read without a lock when the SDK collects, as observable gauges of the
// observer's meter: with l, [MetricLimiterLimit], [MetricLimiterInFlight],
// [MetricLimiterQueued] and, when l has a breaker, [MetricBreakerState];
// with t, [MetricThrottleDropProbability]. Every gauge carries
// [AttrDownstream] = downstream. Either of l and t may be nil; with both
// nil, or with a no-op meter, it registers nothing and returns a
// Registration whose Unregister does nothing.
//
// Call it once per limiter and throttle (one per downstream); Unregister
// the returned Registration when they go. An error is the SDK's refusal of
// an instrument or of the callback: nothing is registered then. The
// breaker's transitions come from its own callback
// ([overload.WithOnTransition]); [Observer.BreakerTransitions] is one that
// counts them.
func (o *Observer) ObserveOverload(downstream string, l *overload.Limiter, t *overload.Throttle) (metric.Registration, error) {
	if !o.metrics || l == nil && t == nil {
		return noRegistration{}, nil
	}
	m := o.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version))
	set := attribute.NewSet(AttrDownstream.String(downstream))
	var errs []error
	var insts []metric.Observable
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		insts = append(insts, g)
		return g
	}
	var limit, inFlight, queued, state metric.Int64ObservableGauge
	var drop metric.Float64ObservableGauge
	var states [3]metric.ObserveOption
	if l != nil {
		limit = gauge(MetricLimiterLimit, "{call}", "Calls the concurrency limiter runs at once now.")
		inFlight = gauge(MetricLimiterInFlight, "{call}", "Calls holding a slot of the concurrency limiter now.")
		queued = gauge(MetricLimiterQueued, "{call}", "Calls waiting for a slot of the concurrency limiter now.")
		if l.Breaker() != nil {
			state = gauge(MetricBreakerState, "1", "The breaker's state: 0 closed, 1 open, 2 half-open.")
			for s := range states {
				states[s] = metric.WithAttributeSet(attribute.NewSet(AttrDownstream.String(downstream),
					AttrBreakerState.String(overload.State(s).String())))
			}
		}
	}
	if t != nil {
		g, err := m.Float64ObservableGauge(MetricThrottleDropProbability, metric.WithUnit("1"),
			metric.WithDescription("Probability that client-side throttling drops a request now."))
		errs = append(errs, err)
		insts = append(insts, g)
		drop = g
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	opt := metric.WithAttributeSet(set)
	return m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		if l != nil {
			running, waiting := l.Len()
			obs.ObserveInt64(limit, int64(l.Limit()), opt)
			obs.ObserveInt64(inFlight, int64(running), opt)
			obs.ObserveInt64(queued, int64(waiting), opt)
			if b := l.Breaker(); b != nil {
				s := b.State()
				obs.ObserveInt64(state, int64(s), states[s%3])
			}
		}
		if t != nil {
			obs.ObserveFloat64(drop, t.DropProbability(), opt)
		}
		return nil
	}, insts...)
}

// BreakerTransitions returns a callback for [overload.WithOnTransition]
// that counts every change of the breaker's state on
// [MetricBreakerTransitions], with [AttrDownstream] = downstream, the state
// left and the new one. With a no-op meter, or if the SDK rejects the
// counter (the error goes to otel.Handle), it counts nothing. It takes no
// lock and, once the nine (from, to) sets are built, allocates nothing.
func (o *Observer) BreakerTransitions(downstream string) func(overload.Transition) {
	if !o.metrics {
		return func(overload.Transition) {}
	}
	m := o.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version))
	c, err := m.Int64Counter(MetricBreakerTransitions, metric.WithUnit("{transition}"),
		metric.WithDescription("Changes of a breaker's state."))
	if err != nil {
		otel.Handle(err)
		return func(overload.Transition) {}
	}
	var opts [3][3][]metric.AddOption
	for from := range opts {
		for to := range opts[from] {
			opts[from][to] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(AttrDownstream.String(downstream),
				AttrBreakerFrom.String(overload.State(from).String()), AttrBreakerState.String(overload.State(to).String())))}
		}
	}
	return func(t overload.Transition) {
		if t.From < 3 && t.To < 3 {
			c.Add(context.Background(), 1, opts[t.From][t.To]...)
		}
	}
}

// noRegistration is the Registration of nothing.
type noRegistration struct{ metric.Registration }

func (noRegistration) Unregister() error { return nil }
