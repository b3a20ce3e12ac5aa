package deadlinemcp

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// CodeBudgetRefused is the JSON-RPC error code a [Server] answers a request
// with when its effective budget is at or below the server's floor, or
// spent, before its handler runs: [mcpbudget.CodeBudgetRefused], the code of
// every SDK adapter's server. The message says the budget and the floor in
// whole milliseconds, rounded up ("deadline budget too small: budget-ms=5,
// floor-ms=20"), and the error's data holds the same two numbers as
// {"budget_ms": 5, "floor_ms": 20} ([mcpbudget.RefusalError]). A [Client]
// never retries it: the next attempt would arrive with even less; its
// error holds a [*mcpbudget.RefusedError] around the *jsonrpc.Error.
const CodeBudgetRefused = mcpbudget.CodeBudgetRefused

// Admission is what a [Server] decided for one request, as reported to
// [WithAdmission]: [mcpbudget.Admission], the shared admission rule's
// result and what the request's _meta held.
type Admission = mcpbudget.Admission

// Server is the receiving side: an MCP server middleware that gives every
// inbound request a budget; create one with [NewServer] and install it on
// an mcp.Server:
//
//	s, err := deadlinemcp.NewServer(opts...)
//	server := mcp.NewServer(impl, nil)
//	server.AddReceivingMiddleware(s.Middleware())
//
// Over streamable HTTP, serve the SDK's handler behind [Server.HTTPHandler],
// so that a budget key repeated in one request's _meta gives its smallest
// value, as a repeated header does in deadlinehttp (the SDK keeps the
// last):
//
//	http.Handle("/mcp", s.HTTPHandler(mcp.NewStreamableHTTPHandler(getServer, nil)))
//
// It is safe for concurrent use.
type Server struct {
	cfg serverConfig
	adm *admission.Admitter // the limits alone: Admit never blocks
}

// NewServer returns a Server configured by opts.
//
// On arrival a request's budget is read from its _meta ([MetaKey],
// [WithInboundMetaKey]) and admitted by the rule every transport of this
// project shares ([admission.Admit]): the effective budget is the smallest
// of the inbound budget, the server's maximum ([WithMaxBudget]) and any
// deadline the request's context already has (the transport's, or an
// outer middleware's, as [deadline.FromContext] finds it). A request
// without the key gets the maximum. The _meta value is read as follows:
//
//   - a JSON integer from 1 to 9999999999: that many milliseconds;
//   - 0: a budget already spent, refused;
//   - an integer larger than 9999999999, however large: clamped to the
//     maximum, as any budget above it is;
//   - a negative or fractional number, a string, a bool, null, an object or
//     an array: malformed and ignored (the maximum applies, and
//     [Admission.Malformed] says so).
//
// A request whose effective budget is at or below the floor ([WithFloor];
// zero when nothing is left, whatever the floor) is refused: the
// middleware answers the JSON-RPC error [CodeBudgetRefused] at once, and
// the handler is not called. Otherwise the handler runs with a context
// that carries the [deadline.Deadline] of that budget and ends at it, so
// that ctx.Done() and every deadline-aware client used inside the handler
// (deadlinehttp, deadlinegrpc, deadlinemcp) spend the same budget. The
// context's cause when it ends is [deadline.ErrDeadlineReached]; when an
// outer deadline set the budget, the context keeps it (no second timer).
// The SDK cancels the same context when the client sends
// notifications/cancelled for the request, except on a stateless
// streamable HTTP server, where the notification reaches another session
// (see [Client]): there the handler's context ends when the caller's POST
// does if the SDK's handler is served behind [Server.HTTPHandler] (or is
// given mcp.StreamableHTTPOptions.PropagateRequestCancellation), else only
// at this middleware's deadline.
//
// Notifications pass through untouched. [WithAdmission] observes each
// decision ([Admission]).
//
// NewServer checks its options once, here: WithMaxBudget(d <= 0),
// WithFloor(d < 0), a floor at or above the maximum and an invalid _meta
// key return a nil Server and a [*deadline.PolicyError] naming the first
// problem. Nil options are ignored.
func NewServer(opts ...ServerOption) (*Server, error) {
	c := serverConfig{ServerBase: mcpbudget.NewServerBase()}
	for _, o := range opts {
		if o != nil {
			o.applyServer(&c)
		}
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	adm, err := admission.NewAdmitter(admission.Config{Limits: c.Limits})
	if err != nil {
		return nil, err
	}
	return &Server{cfg: c, adm: adm}, nil
}

// Middleware returns the receiving middleware; see [NewServer]. Install it
// with mcp.Server.AddReceivingMiddleware.
func (s *Server) Middleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if mcpbudget.Notification(method) {
				return next(ctx, method, req)
			}
			a := s.admit(ctx, method, req)
			if a.Refused() {
				return nil, refusal(a)
			}
			ctx, cancel := mcpbudget.Scope(ctx, a)
			defer cancel()
			ctx, gone := withCallerGone(ctx, req)
			defer gone()
			return next(ctx, method, req)
		}
	}
}

// admit reads the inbound budget, applies the rule and reports it.
func (s *Server) admit(ctx context.Context, method string, req mcp.Request) Admission {
	var meta map[string]any
	if params := req.GetParams(); !isNil(params) {
		meta = params.GetMeta()
	}
	a, _ := mcpbudget.Admit(ctx, s.adm, "", meta, s.cfg.Key)
	for _, f := range s.cfg.admission {
		f(ctx, method, req, a)
	}
	return a
}

// refusal is the JSON-RPC error of a refused request.
func refusal(a Admission) error {
	code, message, data := mcpbudget.RefusalError(a.Decision)
	return &jsonrpc.Error{Code: code, Message: message, Data: data}
}
