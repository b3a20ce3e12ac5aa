package deadlinemcp

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// HTTPHandler returns next, the SDK's streamable HTTP handler
// (mcp.NewStreamableHTTPHandler) of servers that use s's [Server.Middleware],
// behind a filter that applies to a repeated _meta budget the rule
// deadlinehttp applies to a repeated Deadline-Budget-Ms header: the
// smallest valid value wins, so that a proxy that adds a value can lower a
// budget, never raise it.
//
// JSON leaves repeated object keys to the reader; encoding/json, and the
// SDK, keep the last value of a repeated key ({"k": 50, "k": 999999} reads
// 999999, which the maximum then clamps), and merge a repeated _meta
// object into the first. For each JSON-RPC request of a POST body (one
// message or a batch) whose params' _meta objects hold the budget key
// ([MetaKey], [WithInboundMetaKey]) more than once, however its name is
// escaped, the filter rewrites the params so that the one _meta the SDK
// reads holds every key it would have read, and the budget key the
// smallest valid value ([NewServer] says which are valid); malformed
// values are ignored, and a request with no valid value is left as it is.
// Every other body goes through unchanged, byte for byte; a body larger
// than mcp.DefaultMaxRequestBodyBytes is not inspected. The filter reads
// the body before next does; a read error reaches next as it would have.
//
// Without HTTPHandler, and over the stdio and in-memory transports, whose
// messages this package never sees raw, the middleware reads the value the
// SDK decoded: the last.
//
// HTTPHandler also lets the middleware end a handler whose caller has
// gone on a stateless server (mcp.StreamableHTTPOptions.Stateless), where
// notifications/cancelled reaches another session and cancels nothing:
// each POST is served in a session of its own, without an ID, and the
// middleware cancels the context of a request that arrived in such a
// session when its POST ends (the client drops it when its call ends), on
// every protocol version, as PropagateRequestCancellation does for
// protocol 2026-07-28. The cause is context.Canceled. Requests of a
// stateful session are left to notifications/cancelled.
//
// A nil next panics.
func (s *Server) HTTPHandler(next http.Handler) http.Handler {
	if next == nil {
		panic("deadlinemcp: Server.HTTPHandler(nil)")
	}
	key := s.cfg.Key
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = mcpbudget.SmallestRequest(r, key, mcp.DefaultMaxRequestBodyBytes)
		r = r.WithContext(context.WithValue(r.Context(), postKey{}, r.Context()))
		next.ServeHTTP(w, r)
	})
}

// postKey is the context key under which [Server.HTTPHandler] stores the
// context of the HTTP request that carries an MCP request.
type postKey struct{}

// withCallerGone returns ctx, also canceled when the HTTP request that
// carried req ends, when that request is known: the request came through
// [Server.HTTPHandler] to a session without an ID, which the SDK's
// stateless streamable HTTP handler opens for that one POST, with the
// POST's context (whose values reach the handler's). A stateful session
// has an ID, and its context is that of the POST that opened it, not of
// this request's: it is left alone (notifications/cancelled reaches it).
func withCallerGone(ctx context.Context, req mcp.Request) (context.Context, context.CancelFunc) {
	post, ok := ctx.Value(postKey{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); !ok || ss == nil || ss.ID() != "" {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(post, cancel)
	return ctx, func() { stop(); cancel() }
}
