package otelbudgetmcp

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/mcpspan"
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
	return []mcp.Middleware{serverSpans(tracer, mcpspan.NewConfig(otelOpts)), s.Middleware(), endedBy}, nil
}

// serverSpans starts a SERVER span per inbound request.
func serverSpans(tracer trace.Tracer, cfg mcpspan.Config) mcp.Middleware {
	prop := cfg.Propagator
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			p := params(req)
			if p != nil {
				if m := p.GetMeta(); m != nil {
					ctx = prop.Extract(ctx, mcpspan.MetaCarrier(m))
				}
			}
			network := cfg.Network
			if network == "" && req.GetExtra() != nil && req.GetExtra().Header != nil {
				network = genai.NetworkTransportTCP
			}
			ctx, span := mcpspan.StartServer(ctx, tracer, request(method, p, req.GetSession(), network))
			defer span.End()
			ctx, st := mcpspan.WithServerState(ctx)
			res, err := next(ctx, method, req)
			if !st.Settled {
				recordResult(span, res, err)
			}
			return res, err
		}
	}
}

// annotate sets the admission on the SERVER span in ctx.
func annotate(ctx context.Context, _ string, _ mcp.Request, a deadlinemcp.Admission) {
	mcpspan.Admitted(ctx, a)
}

// endedBy records on the SERVER span how an admitted request's handler
// ended. It runs inside the budget middleware, so ctx is the handler's.
func endedBy(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		defer mcpspan.HandlerEnded(ctx)
		return next(ctx, method, req)
	}
}
