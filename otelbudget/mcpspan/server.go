package mcpspan

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/otelbudget"
)

// Admission sets a server's decision about a request's budget on its
// SERVER span, as the deadline.server.* attributes of the HTTP and gRPC
// server spans: deadline.server.inbound_budget_ms (when _meta carried a
// budget), header_malformed (when it carried a value that is not one: the
// key keeps the HTTP name), max_budget_ms, context_remaining_ms (when the
// request arrived with a deadline), budget_ms, limited_by ("header" means
// the inbound _meta budget), floor_ms, what the admission queue and a
// learned rule had to say (queue_wait_ms, completion_probability,
// completion_samples, probe: [otelbudget.AppendServerLearned], as the HTTP
// and gRPC compositions), and on a refusal refused, refusal, status Error
// ("budget 5ms at or below the 20ms floor") and the error.type the HTTP
// server composition gives the same refusal
// ([otelbudget.ServerRefusalErrorType]): queue_full for a full admission
// queue, else deadline_refused. A span that is not recording gets nothing.
func Admission(span trace.Span, a mcpbudget.Admission) {
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 15)
	if a.Inbound.Present {
		attrs = append(attrs, otelbudget.AttrServerInboundBudgetMs.Int64(ms(a.Inbound.Budget)))
	}
	if a.Malformed {
		attrs = append(attrs, otelbudget.AttrServerHeaderMalformed.Bool(true))
	}
	attrs = append(attrs,
		otelbudget.AttrServerMaxBudgetMs.Int64(ms(a.MaxBudget)),
		otelbudget.AttrServerBudgetMs.Int64(ms(a.Budget)),
		otelbudget.AttrServerLimitedBy.String(a.Limit.String()),
		otelbudget.AttrServerFloorMs.Int64(ms(a.Floor)),
	)
	if a.HasOuter {
		attrs = append(attrs, otelbudget.AttrServerContextRemainingMs.Int64(ms(a.OuterRemaining)))
	}
	attrs = otelbudget.AppendServerLearned(attrs, a.Learned, a.Estimate, a.Probe, a.Queued, a.QueueWait)
	if a.Refused() {
		attrs = append(attrs,
			otelbudget.AttrServerRefused.Bool(true),
			otelbudget.AttrServerRefusal.String(a.Refusal.String()),
			semconv.ErrorTypeKey.String(otelbudget.ServerRefusalErrorType(a.Refusal)))
	}
	span.SetAttributes(attrs...)
	if a.Refused() {
		span.SetStatus(codes.Error, refusalDescription(a))
	}
}

func refusalDescription(a mcpbudget.Admission) string {
	switch {
	case a.Refusal == admission.RefusalFloor:
		return "budget " + dur(a.Budget) + " at or below the " + dur(a.Floor) + " floor"
	case a.Refusal == admission.RefusalQueueFull:
		return "admission queue full"
	case a.Refusal != admission.RefusalSpent:
		return "refused: " + a.Refusal.String() + " (budget " + dur(a.Budget) + ")"
	case a.Limit == admission.ByOuter:
		return "budget spent: the request's context deadline had passed on arrival"
	default:
		return "budget spent: the request's _meta said 0"
	}
}

// EndedBy records on span how an admitted request's handler ended, from
// ctx, the context it ran with, once it returned: deadline.server.ended_by
// "completed", "deadline" (its lease ended while it ran: status Error "the
// handler's lease ended (budget 80ms)", error.type deadline_exceeded) or
// "canceled" (the client cancelled the request: no error). It reports
// whether it set the span's status, which a handler's error returned
// after the lease ended then does not replace.
func EndedBy(span trace.Span, ctx context.Context, budget time.Duration) (settled bool) {
	if !span.IsRecording() {
		return false
	}
	switch cerr := ctx.Err(); {
	case cerr == nil:
		span.SetAttributes(otelbudget.AttrServerEndedBy.String("completed"))
	case errors.Is(cerr, context.DeadlineExceeded):
		span.SetAttributes(otelbudget.AttrServerEndedBy.String("deadline"),
			semconv.ErrorTypeKey.String(otelbudget.ErrorTypeServerDeadline))
		span.SetStatus(codes.Error, "the handler's lease ended (budget "+dur(budget)+")")
		return true
	default:
		span.SetAttributes(otelbudget.AttrServerEndedBy.String("canceled"))
	}
	return false
}

// ms converts d to whole milliseconds, rounded to the nearest, as
// otelbudget does.
func ms(d time.Duration) int64 { return d.Round(time.Millisecond).Milliseconds() }

func dur(d time.Duration) string { return d.Round(time.Millisecond).String() }

func fmtAny(v any) string { return fmt.Sprint(v) }

// ServerState is what the middlewares of one request share between its
// SERVER span and its handler: the effective budget, and whether the
// span's status was already decided (a refusal, a lease that ended),
// which an error returned after it does not replace.
type ServerState struct {
	Budget  time.Duration
	Settled bool
}

type stateKey struct{}

// WithServerState returns ctx carrying a new ServerState, and the state.
func WithServerState(ctx context.Context) (context.Context, *ServerState) {
	st := &ServerState{}
	return context.WithValue(ctx, stateKey{}, st), st
}

// ServerStateFrom returns the ServerState ctx carries, nil for none.
func ServerStateFrom(ctx context.Context) *ServerState {
	st, _ := ctx.Value(stateKey{}).(*ServerState)
	return st
}

// Admitted records a on the SERVER span in ctx and in its state: the
// adapters' admission callback. It does nothing outside a SERVER span of
// theirs.
func Admitted(ctx context.Context, a mcpbudget.Admission) {
	span, st := trace.SpanFromContext(ctx), ServerStateFrom(ctx)
	if !span.IsRecording() || st == nil {
		return
	}
	st.Budget, st.Settled = a.Budget, a.Refused()
	Admission(span, a)
}

// HandlerEnded records on the SERVER span in ctx how the handler whose
// context is ctx ended ([EndedBy]), once it returned.
func HandlerEnded(ctx context.Context) {
	span, st := trace.SpanFromContext(ctx), ServerStateFrom(ctx)
	if st != nil && EndedBy(span, ctx, st.Budget) {
		st.Settled = true
	}
}
