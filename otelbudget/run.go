package otelbudget

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
)

// On the run span ([Observer.StartRun]: the root span of a run of several
// calls under one deadline, such as an agent's plan):
const (
	// AttrRunOutcome is how the run ended: one of [RunOK],
	// [RunBudgetExhausted], [RunFailed], [RunCanceled]. Set at End.
	AttrRunOutcome = attribute.Key("deadline.run.outcome")
	// AttrRunUsedMs is the time from the run's start to its end.
	AttrRunUsedMs = attribute.Key("deadline.run.used_ms")
	// AttrRunSteps lists the steps called during the run, in the order
	// they first started (string slice; an unnamed step is
	// "deadline.call").
	AttrRunSteps = attribute.Key("deadline.run.steps")
	// AttrRunStepSpentMs is the time each step of [AttrRunSteps] spent,
	// at the same index: the sum of its calls' durations (int slice).
	AttrRunStepSpentMs = attribute.Key("deadline.run.step_spent_ms")
	// AttrRunStepVerdicts is the verdict of each step of [AttrRunSteps],
	// at the same index: its last call's (string slice).
	AttrRunStepVerdicts = attribute.Key("deadline.run.step_verdicts")
	// AttrRunExhaustedBy is the first step the budget stopped (refused,
	// a wait that did not fit, cut by the deadline: a stop reason for
	// which [deadline.Reason.Budget] is true); absent when none was.
	AttrRunExhaustedBy = attribute.Key("deadline.run.exhausted_by")
)

// The values of [AttrRunOutcome].
const (
	// RunOK: End was given no error.
	RunOK = "ok"
	// RunBudgetExhausted: the run failed and the budget stopped one of its
	// steps (or the error given to End is such a stop).
	RunBudgetExhausted = "budget_exhausted"
	// RunFailed: the run failed for a reason other than the budget.
	RunFailed = "failed"
	// RunCanceled: the error given to End is the caller's cancellation
	// (context.Canceled).
	RunCanceled = "canceled"
)

// unnamedStep names a step whose policy has no name, as its call span is.
const unnamedStep = "deadline.call"

// Run is the span of one run: several calls under one deadline (an
// agent's plan), started by [Observer.StartRun] and ended by [Run.End]. It
// records on that span the budget, the time each step spent, the step that
// exhausted the budget when one did, and the run's outcome, so that any
// tracing backend shows the run's story on its root span.
//
// A Run is safe for concurrent use: its calls may run in parallel. A nil
// *Run does nothing.
type Run struct {
	span  trace.Span
	d     deadline.Deadline
	start time.Time

	mu        sync.Mutex
	ended     bool
	steps     []string // in first-start order
	spent     map[string]time.Duration
	verdicts  map[string]deadline.Verdict
	exhausted string
}

// StartRun starts the span of a run of calls under d, named name ("run"
// when empty), a child of ctx's span, with opts (attributes of your own,
// say). The context returned carries the span, d ([deadline.NewContext])
// and hooks ([deadline.WithHooks], composed after ctx's own) through which
// the run learns how each call under it ended; make the run's calls under
// it, then call [Run.End] once, whatever happened: it sets the attributes
// and ends the span.
//
// At start the span carries [AttrBudgetMs], d's budget. The calls' own
// spans come from the observer's hooks, attached as usual; a call nested
// in another's attempt counts toward its own step's time as well.
func (o *Observer) StartRun(ctx context.Context, name string, d deadline.Deadline, opts ...trace.SpanStartOption) (context.Context, *Run) {
	if name == "" {
		name = "run"
	}
	r := &Run{d: d, spent: map[string]time.Duration{}, verdicts: map[string]deadline.Verdict{}}
	opts = append(opts[:len(opts):len(opts)], trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrBudgetMs.Int64(ms(d.Budget()))))
	ctx, r.span = o.tracer.Start(ctx, name, opts...)
	r.start = time.Now()
	ctx = deadline.NewContext(ctx, d)
	return deadline.WithHooks(ctx, r.hooks()), r
}

// hooks returns the hooks through which r follows its calls.
func (r *Run) hooks() *deadline.Hooks {
	return &deadline.Hooks{
		CallStart: func(_ context.Context, c deadline.CallInfo) context.Context {
			r.mu.Lock()
			defer r.mu.Unlock()
			name := stepName(c.Name)
			if _, seen := r.spent[name]; !seen && !r.ended {
				r.steps = append(r.steps, name)
				r.spent[name] = 0
			}
			return nil
		},
		CallEnd: func(_ context.Context, res deadline.CallResult) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.ended {
				return
			}
			name := stepName(res.Name)
			if _, seen := r.spent[name]; !seen {
				r.steps = append(r.steps, name)
			}
			r.spent[name] += res.Duration
			r.verdicts[name] = deadline.VerdictOf(res)
			if r.exhausted == "" && res.Reason.Budget() {
				r.exhausted = name
			}
		},
	}
}

func stepName(s string) string {
	if s == "" {
		return unnamedStep
	}
	return s
}

// Span returns the run's span (a no-op span for a nil Run).
func (r *Run) Span() trace.Span {
	if r == nil {
		return trace.SpanFromContext(context.Background())
	}
	return r.span
}

// End records the run's story on its span and ends it: the time used and
// left, each step's time and verdict, the step that exhausted the budget,
// and the outcome err gives (see [AttrRunOutcome]): [RunOK] for a nil err,
// [RunCanceled] when err is context.Canceled, [RunBudgetExhausted] when a
// step was stopped by the budget or err is such a stop, else [RunFailed].
// The span's status is Error, described by err, for the last two. Only the
// first End counts; it returns the outcome.
func (r *Run) End(err error) string {
	if r == nil {
		return ""
	}
	now := time.Now()
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return ""
	}
	r.ended = true
	spent := make([]int64, len(r.steps))
	verdicts := make([]string, len(r.steps))
	for i, s := range r.steps {
		spent[i] = ms(r.spent[s])
		verdicts[i] = string(r.verdicts[s])
	}
	outcome := runOutcome(err, r.exhausted)
	attrs := []attribute.KeyValue{
		AttrRunOutcome.String(outcome),
		AttrRunUsedMs.Int64(ms(now.Sub(r.start))),
		AttrRemainingMs.Int64(ms(r.d.End().Sub(now))),
		AttrRunSteps.StringSlice(r.steps),
		AttrRunStepSpentMs.Int64Slice(spent),
		AttrRunStepVerdicts.StringSlice(verdicts),
	}
	if r.exhausted != "" {
		attrs = append(attrs, AttrRunExhaustedBy.String(r.exhausted))
	}
	r.mu.Unlock()
	r.span.SetAttributes(attrs...)
	if outcome == RunFailed || outcome == RunBudgetExhausted {
		r.span.SetStatus(codes.Error, err.Error())
	}
	r.span.End(trace.WithTimestamp(now))
	return outcome
}

// runOutcome is the outcome of a run that ended with err, exhausted naming
// the step the budget stopped ("" when none).
func runOutcome(err error, exhausted string) string {
	if err == nil {
		return RunOK
	}
	se, stopped := errors.AsType[*deadline.StopError](err)
	if errors.Is(err, context.Canceled) || stopped && se.Reason == deadline.ReasonCanceled {
		return RunCanceled
	}
	if exhausted != "" || stopped && se.Reason.Budget() {
		return RunBudgetExhausted
	}
	return RunFailed
}
