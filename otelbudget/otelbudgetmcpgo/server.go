package otelbudgetmcpgo

import (
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/mcpspan"
)

// ServerOptions returns a [deadlinemcpgo.Server] built from opts and the
// mcp-go server options that install it with spans, to pass to
// server.NewMCPServer; serve its HTTP transports behind the Server's
// HTTPHandler. For each tools/call, prompts/get and resources/read (the
// requests mcp-go lets a server wrap) they add, as otelbudgetmcp's
// ServerMiddleware does for the go-sdk:
//
//  1. one SERVER span, started with a tracer of obs.TracerProvider() in
//     the context the trace context of the request's _meta gives, named
//     and attributed as [ClientTransport]'s CLIENT span (network.transport
//     "tcp" when the request came over HTTP);
//  2. the Server's admission, whose decision goes on that span as the
//     deadline.server.* attributes (mcpspan.Admission), a refusal with
//     status Error and error.type deadline_refused, or queue_full when
//     the admission queue ([deadlinemcpgo.WithQueue]) was full, as an
//     HTTP server's span says for the same refusal;
//  3. deadline.server.ended_by once an admitted handler returned
//     (mcpspan.EndedBy).
//
// A handler's error, or a tool result with isError, sets status Error too.
// A [deadlinemcpgo.WithAdmission] in opts runs as well, after the one this
// composition installs. The other requests (initialize, the lists) get no
// span: mcp-go answers them without user code. A nil obs means
// otelbudget.New(). It returns the [*deadline.PolicyError] of an invalid
// option.
func ServerOptions(obs *otelbudget.Observer, opts []deadlinemcpgo.ServerOption, otelOpts ...Option) (*deadlinemcpgo.Server, []server.ServerOption, error) {
	if obs == nil {
		obs = otelbudget.New()
	}
	all := make([]deadlinemcpgo.ServerOption, 0, len(opts)+1)
	all = append(all, deadlinemcpgo.WithAdmission(annotate))
	all = append(all, opts...)
	s, err := deadlinemcpgo.NewServer(all...)
	if err != nil {
		return nil, nil, err
	}
	sp := serverSpans{
		tracer: obs.TracerProvider().Tracer(ScopeName, trace.WithInstrumentationVersion(otelbudget.Version())),
		cfg:    mcpspan.NewConfig(otelOpts),
	}
	return s, []server.ServerOption{
		server.WithToolHandlerMiddleware(sp.tool),
		server.WithToolHandlerMiddleware(s.ToolMiddleware()),
		server.WithToolHandlerMiddleware(endedTool),
		server.WithPromptHandlerMiddleware(sp.prompt),
		server.WithPromptHandlerMiddleware(s.PromptMiddleware()),
		server.WithPromptHandlerMiddleware(endedPrompt),
		server.WithResourceHandlerMiddleware(sp.resource),
		server.WithResourceHandlerMiddleware(s.ResourceMiddleware()),
		server.WithResourceHandlerMiddleware(endedResource),
	}, nil
}

type serverSpans struct {
	tracer trace.Tracer
	cfg    mcpspan.Config
}

// around runs h inside the SERVER span of one request.
func around[T any](ctx context.Context, sp serverSpans, r mcpspan.Request, meta *mcp.Meta, header http.Header, h func(context.Context) (T, error), toolError func(T) bool) (T, error) {
	if meta != nil && meta.AdditionalFields != nil {
		ctx = sp.cfg.Propagator.Extract(ctx, mcpspan.MetaCarrier(meta.AdditionalFields))
	}
	r.Network = sp.cfg.Network
	if r.Network == "" && len(header) > 0 {
		r.Network = genai.NetworkTransportTCP
	}
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		r.SessionID = cs.SessionID()
	}
	ctx, span := mcpspan.StartServer(ctx, sp.tracer, r)
	defer span.End()
	ctx, st := mcpspan.WithServerState(ctx)
	res, err := h(ctx)
	if !st.Settled {
		mcpspan.RecordResult(span, err, err == nil && toolError(res), nil)
	}
	return res, err
}

func (sp serverSpans) tool(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return around(ctx, sp, mcpspan.Request{Method: "tools/call", Tool: req.Params.Name}, req.Params.Meta, req.Header,
			func(ctx context.Context) (*mcp.CallToolResult, error) { return next(ctx, req) },
			func(r *mcp.CallToolResult) bool { return r != nil && r.IsError })
	}
}

func (sp serverSpans) prompt(next server.PromptHandlerFunc) server.PromptHandlerFunc {
	return func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return around(ctx, sp, mcpspan.Request{Method: "prompts/get"}, req.Params.Meta, req.Header,
			func(ctx context.Context) (*mcp.GetPromptResult, error) { return next(ctx, req) },
			func(*mcp.GetPromptResult) bool { return false })
	}
}

func (sp serverSpans) resource(next server.ResourceHandlerFunc) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return around(ctx, sp, mcpspan.Request{Method: "resources/read"}, req.Params.Meta, req.Header,
			func(ctx context.Context) ([]mcp.ResourceContents, error) { return next(ctx, req) },
			func([]mcp.ResourceContents) bool { return false })
	}
}

// annotate sets the admission on the SERVER span in ctx.
func annotate(ctx context.Context, _, _ string, a mcpbudget.Admission) { mcpspan.Admitted(ctx, a) }

func endedTool(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		defer mcpspan.HandlerEnded(ctx)
		return next(ctx, req)
	}
}

func endedPrompt(next server.PromptHandlerFunc) server.PromptHandlerFunc {
	return func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		defer mcpspan.HandlerEnded(ctx)
		return next(ctx, req)
	}
}

func endedResource(next server.ResourceHandlerFunc) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		defer mcpspan.HandlerEnded(ctx)
		return next(ctx, req)
	}
}
