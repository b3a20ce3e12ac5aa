package otelbudgetmcp

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// ServerMiddleware returns the receiving middleware to install, in this
// order, on an mcp.Server (server.AddReceivingMiddleware(mws...)):
//
//  1. one SERVER span per inbound request (not per notification), started
//     with a tracer of obs.TracerProvider() in the context the trace
//     context of the request's _meta gives (extracted by the propagator of
//     [WithPropagators], default the global one), named and attributed as [ClientMiddleware]'s CLIENT span;
//  2. a [deadlinemcp.Server] built from opts, whose decision about the
//     request's budget ([deadlinemcp.Admission]) goes on that span as the
//     deadline.server.* attributes of the HTTP and gRPC server spans:
//     deadline.server.inbound_budget_ms (when _meta carried a budget),
//     header_malformed (when it carried a value that is not one: the key
//     keeps the HTTP name), max_budget_ms, context_remaining_ms (when the
//     request arrived with a deadline), budget_ms, limited_by ("header"
//     means the inbound _meta budget), floor_ms, and on a refusal refused,
//     refusal, error.type deadline_refused and status Error ("budget 5ms
//     at or below the 20ms floor");
//  3. a middleware that records how the handler of an admitted request
//     ended, as deadline.server.ended_by: "completed", "deadline" (its
//     lease ended while it ran: status Error "the handler's lease ended
//     (budget 80ms)", error.type deadline_exceeded) or "canceled" (the
//     client cancelled the request: no error).
//
// A handler that returns a JSON-RPC error, or a tool result with isError,
// sets status Error too, as on the client. A [deadlinemcp.WithAdmission]
// in opts runs as well, after the one this composition installs. A nil obs
// means otelbudget.New(). It returns the [*deadline.PolicyError] of an
// invalid option, as [deadlinemcp.NewServer] does.
func ServerMiddleware(obs *otelbudget.Observer, opts []deadlinemcp.ServerOption, otelOpts ...Option) ([]mcp.Middleware, error) {
	if obs == nil {
		obs = otelbudget.New()
	}
	all := make([]deadlinemcp.ServerOption, 0, len(opts)+1)
	all = append(all, deadlinemcp.WithAdmission(annotate))
	all = append(all, opts...)
	s, err := deadlinemcp.NewServer(all...)
	if err != nil {
		return nil, err
	}
	tracer := obs.TracerProvider().Tracer(ScopeName, trace.WithInstrumentationVersion(otelbudget.Version()))
	return []mcp.Middleware{serverSpans(tracer, newConfig(otelOpts)), s.Middleware(), endedBy}, nil
}

// serverState is what the three middlewares of one request share: the
// effective budget, and whether the span's status was already decided (a
// refusal, a lease that ended), which an error returned after it does not
// replace.
type serverState struct {
	budget  time.Duration
	settled bool
}

type stateKey struct{}

func state(ctx context.Context) *serverState {
	st, _ := ctx.Value(stateKey{}).(*serverState)
	return st
}

// serverSpans starts a SERVER span per inbound request.
func serverSpans(tracer trace.Tracer, cfg config) mcp.Middleware {
	prop := cfg.prop
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			p := params(req)
			if p != nil {
				if m := p.GetMeta(); m != nil {
					ctx = prop.Extract(ctx, metaCarrier(m))
				}
			}
			name, attrs := spanName(method, p, req.GetSession())
			switch {
			case cfg.transport != "":
				attrs = append(attrs, genai.NetworkTransportKey.String(cfg.transport))
			case req.GetExtra() != nil && req.GetExtra().Header != nil:
				attrs = append(attrs, genai.NetworkTransportKey.String(genai.NetworkTransportTCP))
			}
			ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			defer span.End()
			st := &serverState{}
			res, err := next(context.WithValue(ctx, stateKey{}, st), method, req)
			if !st.settled {
				recordResult(span, res, err)
			}
			return res, err
		}
	}
}

// annotate sets the admission on the SERVER span in ctx.
func annotate(ctx context.Context, _ string, _ mcp.Request, a deadlinemcp.Admission) {
	span := trace.SpanFromContext(ctx)
	st := state(ctx)
	if !span.IsRecording() || st == nil {
		return
	}
	st.budget, st.settled = a.Budget, a.Refused()
	attrs := make([]attribute.KeyValue, 0, 11)
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
	if a.Refused() {
		attrs = append(attrs,
			otelbudget.AttrServerRefused.Bool(true),
			otelbudget.AttrServerRefusal.String(a.Refusal.String()),
			semconv.ErrorTypeKey.String(otelbudget.ErrorTypeServerRefused))
	}
	span.SetAttributes(attrs...)
	if a.Refused() {
		span.SetStatus(codes.Error, refusalDescription(a))
	}
}

func refusalDescription(a deadlinemcp.Admission) string {
	switch {
	case a.Refusal == admission.RefusalFloor:
		return "budget " + dur(a.Budget) + " at or below the " + dur(a.Floor) + " floor"
	case a.Limit == admission.ByOuter:
		return "budget spent: the request's context deadline had passed on arrival"
	default:
		return "budget spent: the request's _meta said 0"
	}
}

// endedBy records on the SERVER span how an admitted request's handler
// ended. It runs inside the budget middleware, so ctx is the handler's.
func endedBy(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		res, err := next(ctx, method, req)
		span, st := trace.SpanFromContext(ctx), state(ctx)
		if !span.IsRecording() || st == nil {
			return res, err
		}
		switch cerr := ctx.Err(); {
		case cerr == nil:
			span.SetAttributes(otelbudget.AttrServerEndedBy.String("completed"))
		case errors.Is(cerr, context.DeadlineExceeded):
			span.SetAttributes(otelbudget.AttrServerEndedBy.String("deadline"),
				semconv.ErrorTypeKey.String(otelbudget.ErrorTypeServerDeadline))
			span.SetStatus(codes.Error, "the handler's lease ended (budget "+dur(st.budget)+")")
			st.settled = true
		default:
			span.SetAttributes(otelbudget.AttrServerEndedBy.String("canceled"))
		}
		return res, err
	}
}

// ms converts d to whole milliseconds, rounded to the nearest, as
// otelbudget does.
func ms(d time.Duration) int64 { return d.Round(time.Millisecond).Milliseconds() }

func dur(d time.Duration) string { return d.Round(time.Millisecond).String() }
