package otelbudget

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
)

// attempt is one attempt's span and the bookkeeping that decides when it
// really ends.
//
// A span is ended once two things are true: its owner asked to end it
// (AttemptEnd for the observer's own span; the client instrumentation's End
// for a claimed client span, which may come before or after AttemptEnd),
// and its outcome is settled (AttemptEnd when no retry can follow, else the
// Backoff hook that adds the wait, or CallEnd). The end timestamp is always
// the one the owner asked for, so the deferral never stretches a span.
type attempt struct {
	o      *Observer
	info   deadline.AttemptInfo
	client bool            // the span comes from a client instrumentation
	parent context.Context // client mode: where a fallback span starts

	mu       sync.Mutex
	span     trace.Span       // nil until started or claimed
	outcome  deadline.EndedBy // 0 until AttemptEnd
	status   codes.Code       // client mode: status asked before the outcome was known
	desc     string
	statusOK bool // status/desc hold a pending request
	settled  bool
	endAsked bool
	endAt    time.Time
	ended    bool
}

// startAttrs are the attributes known when the attempt starts. resend says
// whether they are for a span that counts resends: only a client span of one
// physical HTTP request does; the observer's own INTERNAL span and an RPC
// client span carry deadline.attempt.number alone.
func (at *attempt) startAttrs(resend bool) []attribute.KeyValue {
	a := at.info
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		AttrStep.String(a.Name),
		AttrAttemptNumber.Int(a.Number),
		AttrAttemptGrantedMs.Int64(ms(a.Granted)),
		AttrAttemptRemainingMs.Int64(ms(a.Remaining)),
		AttrAttemptLimitedBy.String(a.LimitedBy.String()),
	)
	if a.Ceiling > 0 {
		attrs = append(attrs, AttrAttemptCeilingMs.Int64(ms(a.Ceiling)))
	}
	if a.CeilingQuantile > 0 {
		attrs = append(attrs, AttrAttemptCeilingQuantile.Float64(a.CeilingQuantile))
	}
	if a.Hedge {
		attrs = append(attrs, AttrAttemptHedge.Bool(true))
	}
	if a.Estimate.Samples > 0 {
		attrs = append(attrs, AttrAttemptCompletionProbability.Float64(a.Estimate.P),
			AttrAttemptCompletionSamples.Int64(int64(a.Estimate.Samples)))
	}
	if a.Probe {
		attrs = append(attrs, AttrAttemptProbe.Bool(true))
	}
	if resend && a.Number > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(a.Number-1))
	}
	return attrs
}

// claim makes span, just started by a client instrumentation, this
// attempt's span. It reports false when the attempt already has one.
func (at *attempt) claim(start func() trace.Span) (trace.Span, bool) {
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.span != nil || at.outcome != 0 {
		return nil, false
	}
	at.span = start()
	return at.span, true
}

// finish records how the attempt ended (the AttemptEnd hook).
func (at *attempt) finish(r deadline.AttemptResult) {
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.outcome != 0 {
		return
	}
	at.outcome = r.EndedBy
	end := at.info.Start.Add(r.Duration)
	owned := !at.client
	if at.span == nil {
		// Client mode, but no client span claimed the attempt: record it
		// with a span of our own so that every attempt is visible.
		owned, at.client = true, false
		_, at.span = at.o.tracer.Start(at.parent, at.o.cache.attemptName(at.info.Name),
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(at.info.Start),
			trace.WithAttributes(at.startAttrs(false)...))
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, AttrAttemptEndedBy.String(r.EndedBy.String()))
	if r.HedgeWinner {
		attrs = append(attrs, AttrAttemptHedgeWinner.Bool(true))
	}
	// A hedge that lost did not fail: another attempt's success ended it.
	lost := r.EndedBy == deadline.EndedHedgeLost
	failed := r.EndedBy != deadline.EndedCompleted && !lost
	if r.Err != nil && !lost {
		attrs = append(attrs, AttrAttemptRetryable.Bool(r.Retryable))
		if ra, ok := deadline.RetryAfterOf(r.Err); ok {
			attrs = append(attrs, AttrRetryAfterMs.Int64(ms(ra)))
		}
	}
	if failed {
		// Also on a client span, over what its instrumentation derived from
		// the error it saw (otelhttp: the Go type of a transport error), so
		// that error.type takes the same values with or without it.
		attrs = append(attrs, semconv.ErrorTypeKey.String(attemptErrorType(r)))
	}
	canceled := r.EndedBy == deadline.EndedCanceled || lost
	if at.client {
		// The client instrumentation owns the status; only a caller's
		// cancellation is taken back from Error, and a failure it did not
		// see is added.
		switch {
		case at.statusOK && !(canceled && at.status == codes.Error):
			at.span.SetStatus(at.status, at.desc)
			if at.status != codes.Error && failed && !canceled {
				at.span.SetStatus(codes.Error, errText(r))
			}
		case !at.statusOK && failed && !canceled:
			at.span.SetStatus(codes.Error, errText(r))
		}
	} else if failed && !canceled {
		at.span.SetStatus(codes.Error, errText(r))
	}
	at.span.SetAttributes(attrs...)
	if owned || r.EndedBy == deadline.EndedPanic {
		// A panicking operation never returns to its client
		// instrumentation, which will not end its span: end it here.
		at.askEnd(end)
	}
	if !r.Retryable || r.EndedBy == deadline.EndedPanic {
		at.settleLocked()
	}
}

func errText(r deadline.AttemptResult) string {
	if r.Err != nil {
		return r.Err.Error()
	}
	return r.EndedBy.String()
}

// backoff adds the wait chosen after this failed attempt and settles it.
func (at *attempt) backoff(b deadline.BackoffInfo) {
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.span != nil && !at.ended {
		attrs := make([]attribute.KeyValue, 0, 5)
		attrs = append(attrs,
			AttrBackoffDelayMs.Int64(ms(b.Delay)),
			AttrBackoffSource.String(b.Source.String()),
			AttrBackoffFits.Bool(b.Fits),
		)
		if b.RetryBudget {
			attrs = append(attrs, AttrRetryBudgetDenied.Bool(b.RetryDenied), AttrRetryBudgetBalance.Int(b.RetryBalance))
		}
		at.span.SetAttributes(attrs...)
	}
	at.settleLocked()
}

// settle marks the outcome complete (CallEnd).
func (at *attempt) settle() {
	at.mu.Lock()
	defer at.mu.Unlock()
	at.settleLocked()
}

func (at *attempt) settleLocked() {
	at.settled = true
	at.endLocked()
}

// askEnd records the owner's request to end the span at t.
func (at *attempt) askEnd(t time.Time) {
	if at.endAsked {
		return
	}
	at.endAsked, at.endAt = true, t
	at.endLocked()
}

func (at *attempt) endLocked() {
	if at.ended || !at.endAsked || !at.settled || at.span == nil {
		return
	}
	at.ended = true
	at.span.End(trace.WithTimestamp(at.endAt))
}

// clientEnd is the client instrumentation's End on the span it started.
func (at *attempt) clientEnd(opts []trace.SpanEndOption) {
	cfg := trace.NewSpanEndConfig(opts...)
	t := cfg.Timestamp()
	if t.IsZero() {
		t = time.Now()
	}
	at.mu.Lock()
	defer at.mu.Unlock()
	at.askEnd(t)
}

// clientStatus is the client instrumentation's SetStatus: held until the
// outcome is known, so that a caller's cancellation is not recorded as an
// error.
func (at *attempt) clientStatus(code codes.Code, desc string) {
	at.mu.Lock()
	defer at.mu.Unlock()
	switch {
	case at.outcome == 0:
		at.status, at.desc, at.statusOK = code, desc, true
	case (at.outcome == deadline.EndedCanceled || at.outcome == deadline.EndedHedgeLost) && code == codes.Error:
	case !at.ended:
		at.span.SetStatus(code, desc)
	}
}
