package agentrun

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// PanicError is a tool function's panic, recovered on the goroutine
// [CallTool] ran it on. Before the tool is abandoned, CallTool returns it
// as the attempt's error: the adapter hands it to its framework the way
// the framework reports a panicking tool (Eino: raised again on the
// framework's goroutine, which Eino's graph recovers into its "panic
// error"; Genkit: returned as the tool's error, which Genkit wraps in its
// INTERNAL *core.GenkitError). After abandonment it is reported through
// otel.Handle.
type PanicError struct {
	Tool  string // the tool's name
	Value any    // what the tool panicked with
	Stack []byte // the tool goroutine's stack at the panic
	Late  bool   // the tool had been abandoned when it panicked
}

func (e *PanicError) Error() string {
	if e.Late {
		return fmt.Sprintf("agentrun: tool %q panicked after it was abandoned: %v", e.Tool, e.Value)
	}
	return fmt.Sprintf("agentrun: tool %q panicked: %v", e.Tool, e.Value)
}

// ErrorType is "tool_panic", for error.type.
func (e *PanicError) ErrorType() string { return "tool_panic" }

// AbandonedError is the error of a tool call attempt that did not return
// when its lease (and the grace) ended: the run stopped waiting for it. It
// matches context.DeadlineExceeded and the lease's cause (e.g.
// deadline.ErrDeadlineReached).
type AbandonedError struct {
	Tool   string        // the tool's name
	CallID string        // the model's id of the call, "" when unknown
	Lease  time.Duration // the lease it ran out
	Cause  error         // why the lease ended (context.Cause)
}

func (e *AbandonedError) Error() string {
	return fmt.Sprintf("agentrun: tool %q abandoned: it did not return within its %v lease (%v)", e.Tool, e.Lease, e.Cause)
}

// Unwrap returns the lease's cause.
func (e *AbandonedError) Unwrap() error { return e.Cause }

// ErrorType is "tool_abandoned".
func (e *AbandonedError) ErrorType() string { return "tool_abandoned" }

// ToolCall names one tool call of a run.
type ToolCall struct {
	Name   string
	CallID string        // the model's id, "" when unknown
	Lease  time.Duration // the attempt's lease (deadline.AttemptInfo.Granted)
	Span   trace.Span    // the attempt's execute_tool span
}

// the states of one tool goroutine.
const (
	running int32 = iota
	finished
	gaveUp
)

// CallTool runs fn with ctx (the attempt's leased context) on a goroutine
// of its own, counted in the run's tools ([Run.WaitTools]), and returns
// what it returns. When ctx ends and fn has not returned within the run's
// grace, the call is abandoned: CallTool returns an [*AbandonedError]
// (wrapping ctx's cause) with abandoned true, records the call in the run's Abandoned, sets
// [AttrToolAbandoned] on tc.Span, and leaves fn running; its result is
// discarded.
//
// The goroutine always recovers. A panic before abandonment is returned as
// a [*PanicError] (the adapter reports it as its framework reports a
// panicking tool). A panic after abandonment is never re-raised: it is
// recorded in the run's Abandoned (Abandoned.Panic), counted
// ([MetricToolLatePanics]), added as an event to the run span when it is
// still open, and reported through otel.Handle.
func CallTool[T any](ctx context.Context, r *Run, tc ToolCall, fn func(context.Context) (T, error)) (v T, abandoned bool, err error) {
	type outcome struct {
		v   T
		err error
	}
	done := make(chan outcome, 1) // buffered: an abandoned fn never blocks
	var state atomic.Int32
	r.mu.Lock()
	r.toolCalls++
	r.mu.Unlock()
	r.tools.Add(1)
	go func() {
		defer r.tools.Done()
		var o outcome
		defer func() {
			if pv := recover(); pv != nil {
				pe := &PanicError{Tool: tc.Name, Value: pv, Stack: debug.Stack()}
				if !state.CompareAndSwap(running, finished) {
					pe.Late = true
					r.latePanic(tc, pe)
					return
				}
				o = outcome{err: pe}
				done <- o
				return
			}
			if state.CompareAndSwap(running, finished) {
				done <- o
			}
		}()
		o.v, o.err = fn(ctx)
	}()
	select {
	case o := <-done:
		return o.v, false, o.err
	case <-ctx.Done():
	}
	t := time.NewTimer(r.cfg.Grace)
	defer t.Stop()
	select {
	case o := <-done:
		return o.v, false, o.err
	case <-t.C:
	}
	if !state.CompareAndSwap(running, gaveUp) {
		o := <-done // it finished as the grace ran out
		return o.v, false, o.err
	}
	r.mu.Lock()
	r.abandoned = append(r.abandoned, Abandoned{Tool: tc.Name, CallID: tc.CallID, Lease: tc.Lease})
	r.mu.Unlock()
	if s := tc.Span; s != nil {
		s.SetAttributes(AttrToolAbandoned.Bool(true))
	}
	var zero T
	return zero, true, &AbandonedError{Tool: tc.Name, CallID: tc.CallID, Lease: tc.Lease, Cause: context.Cause(ctx)}
}

// latePanic records the panic of a tool abandoned earlier.
func (r *Run) latePanic(tc ToolCall, pe *PanicError) {
	r.mu.Lock()
	for i := range r.abandoned {
		a := &r.abandoned[i]
		if a.Tool == tc.Name && a.CallID == tc.CallID && a.Panic == nil {
			a.Panic = pe.Value
			break
		}
	}
	run, counter := r.span, r.latePanics
	r.mu.Unlock()
	if counter != nil {
		counter.Add(context.Background(), 1, metric.WithAttributes(otelbudget.AttrStep.String(ToolStep(tc.Name))))
	}
	if run != nil && run.IsRecording() {
		run.AddEvent("deadline.tool.late_panic", trace.WithAttributes(
			genai.ToolNameKey.String(tc.Name), genai.ToolCallIDKey.String(tc.CallID),
			attribute.String("exception.message", fmt.Sprint(pe.Value))))
	}
	otel.Handle(pe)
}

// RecordError sets err on a tool or chat attempt span: error.type and
// the Error status.
func RecordError(s trace.Span, err error) {
	if s == nil || err == nil {
		return
	}
	s.SetAttributes(genai.ErrorTypeKey.String(ErrorType(err)))
	s.SetStatus(codes.Error, err.Error())
}
