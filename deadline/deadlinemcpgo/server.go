package deadlinemcpgo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// Server is the receiving side for an mcp-go server: handler middleware
// that gives every tool, prompt and resource handler the budget its
// request's _meta carries. Create one with [NewServer] and install it with
// [Server.Options]:
//
//	s, err := deadlinemcpgo.NewServer(deadlinemcpgo.WithFloor(20 * time.Millisecond))
//	srv := server.NewMCPServer("search", "v1", s.Options()...)
//
// Over streamable HTTP and SSE, serve mcp-go's handler behind
// [Server.HTTPHandler], so that a budget key repeated in one request's
// _meta gives its smallest value.
//
// It is safe for concurrent use.
type Server struct {
	cfg serverConfig
	adm *admission.Admitter
}

// NewServer returns a Server configured by opts.
//
// On arrival a request's budget is read from its _meta
// ([mcpbudget.MetaKey], [WithInboundMetaKey]; [mcpbudget.Parse] says what
// a value means) and admitted by the rule every transport of this project
// shares ([admission.Admitter]): the effective budget is the smallest of
// the inbound budget, the server's maximum ([WithMaxBudget]) and any
// deadline the request's context already has; then, with [WithQueue] or
// [WithLimiter], the request waits for a slot while it can still finish.
// A request refused (its budget at or below the floor, [WithFloor]; zero
// when nothing is left; the queue full or its wait too long) is answered
// with the JSON-RPC error [mcpbudget.CodeBudgetRefused] and the data of
// [mcpbudget.RefusalError], the go-sdk adapter's error, and its handler is
// not called. Otherwise the handler runs with a context that carries the
// [deadline.Deadline] of that budget and ends at it (cause
// [deadline.ErrDeadlineReached]).
//
// mcp-go lets a server wrap the handlers it runs for tools/call,
// prompts/get and resources/read, after it found the tool, prompt or
// resource, and nothing else: the other methods (initialize, ping, the
// lists, completion) are answered by mcp-go from memory, without user
// code, and are neither bounded nor refused. docs/mcp.md says what else
// differs from the go-sdk adapter.
//
// NewServer checks its options once, here: WithMaxBudget(d <= 0),
// WithFloor(d < 0), a floor at or above the maximum, an invalid _meta key
// and both WithQueue and WithLimiter return a nil Server and a
// [*deadline.PolicyError] naming the first problem. Nil options are
// ignored.
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
	lim := c.limiter
	if c.queue != nil {
		if lim != nil {
			return nil, &deadline.PolicyError{Field: "deadlinemcpgo.WithLimiter", Value: "set with WithQueue", Allowed: "WithQueue or WithLimiter, not both"}
		}
		lim = c.queue
	}
	adm, err := admission.NewAdmitter(admission.Config{Limits: c.Limits, Limiter: lim})
	if err != nil {
		return nil, err
	}
	return &Server{cfg: c, adm: adm}, nil
}

// Options returns the mcp-go server options that install the server's
// middleware on tools, prompts and resources: pass them to
// server.NewMCPServer. They are [Server.ToolMiddleware],
// [Server.PromptMiddleware] and [Server.ResourceMiddleware], added first,
// so that they wrap any middleware added after them.
func (s *Server) Options() []server.ServerOption {
	return []server.ServerOption{
		server.WithToolHandlerMiddleware(s.ToolMiddleware()),
		server.WithPromptHandlerMiddleware(s.PromptMiddleware()),
		server.WithResourceHandlerMiddleware(s.ResourceMiddleware()),
	}
}

// ToolMiddleware returns the middleware of tools/call handlers; see
// [NewServer].
func (s *Server) ToolMiddleware() server.ToolHandlerMiddleware {
	return func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return run(ctx, s, "tools/call", req.Params.Name, req.Params.Meta, func(ctx context.Context) (*mcp.CallToolResult, error) {
				return next(ctx, req)
			})
		}
	}
}

// PromptMiddleware returns the middleware of prompts/get handlers; see
// [NewServer].
func (s *Server) PromptMiddleware() server.PromptHandlerMiddleware {
	return func(next server.PromptHandlerFunc) server.PromptHandlerFunc {
		return func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return run(ctx, s, "prompts/get", req.Params.Name, req.Params.Meta, func(ctx context.Context) (*mcp.GetPromptResult, error) {
				return next(ctx, req)
			})
		}
	}
}

// ResourceMiddleware returns the middleware of resources/read handlers;
// see [NewServer].
func (s *Server) ResourceMiddleware() server.ResourceHandlerMiddleware {
	return func(next server.ResourceHandlerFunc) server.ResourceHandlerFunc {
		return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return run(ctx, s, "resources/read", req.Params.URI, req.Params.Meta, func(ctx context.Context) ([]mcp.ResourceContents, error) {
				return next(ctx, req)
			})
		}
	}
}

// run admits one request and runs its handler h under the admitted
// budget, or answers the refusal.
func run[T any](ctx context.Context, s *Server, method, name string, meta *mcp.Meta, h func(context.Context) (T, error)) (res T, err error) {
	var fields map[string]any
	if meta != nil {
		fields = meta.AdditionalFields
	}
	route := ""
	if s.cfg.queue != nil || s.cfg.limiter != nil {
		route = mcpbudget.Route(method, name) // what the queue tells apart
	}
	a, ticket := mcpbudget.Admit(ctx, s.adm, route, fields, s.cfg.Key)
	for _, f := range s.cfg.admission {
		f(ctx, method, name, a)
	}
	if a.Refused() {
		return res, server.NewHandlerError(refusal(a))
	}
	ctx, cancel := mcpbudget.Scope(ctx, a)
	defer cancel()
	returned := false
	defer func() { ticket.Done(ctx, returned) }()
	res, err = h(ctx)
	returned = true
	return res, err
}

// refusalError is the JSON-RPC error of a refused request, as mcp-go
// answers a handler's error that provides one (server.NewHandlerError).
type refusalError struct {
	code    int64
	message string
	data    json.RawMessage
}

func refusal(a mcpbudget.Admission) refusalError {
	code, message, data := mcpbudget.RefusalError(a.Decision)
	return refusalError{code, message, data}
}

func (e refusalError) Error() string { return e.message }

func (e refusalError) JSONRPCError() mcp.JSONRPCError {
	return mcp.JSONRPCError{
		JSONRPC: mcp.JSONRPC_VERSION,
		Error:   mcp.JSONRPCErrorDetails{Code: int(e.code), Message: e.message, Data: e.data},
	}
}

// HTTPHandler returns next, mcp-go's streamable HTTP server
// (server.NewStreamableHTTPServer) or SSE server (server.NewSSEServer) of
// an mcp-go server that uses s's [Server.Options], behind a filter that
// applies to a repeated _meta budget the rule deadlinehttp applies to a
// repeated Deadline-Budget-Ms header: the smallest valid value wins
// ([mcpbudget.SmallestBody]), so that a proxy that adds a value can lower
// a budget, never raise it. mcp-go decodes _meta with encoding/json, which
// keeps the last value of a repeated key. Every other body passes byte for
// byte; a body larger than server.DefaultMaxRequestBodyBytes is not
// inspected. Over stdio and the in-process transport, whose messages this
// package never sees raw, the last value still wins.
//
// It also accepts (HTTP 202) a POST without an Mcp-Session-Id that holds
// only notifications/cancelled, without passing it on: without a session
// there is nothing it could cancel (the request's handler ends when its own
// POST does), and mcp-go answers one that lacks protocol 2026-07-28's
// _meta, as the go-sdk's client sends it, with HTTP 400, which makes that
// client close its connection.
//
// A nil next panics.
func (s *Server) HTTPHandler(next http.Handler) http.Handler {
	if next == nil {
		panic("deadlinemcpgo: Server.HTTPHandler(nil)")
	}
	key := s.cfg.Key
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = mcpbudget.SmallestRequest(r, key, server.DefaultMaxRequestBodyBytes)
		if r.Method == http.MethodPost && r.Header.Get(server.HeaderKeySessionID) == "" && sessionlessCancel(r) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sessionlessCancel reports whether r's body (already read into memory by
// SmallestBody, and put back) is one notifications/cancelled.
func sessionlessCancel(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength > 64<<10 {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10+1))
	r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || len(body) > 64<<10 || !bytes.Contains(body, []byte("notifications/cancelled")) {
		return false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	return json.Unmarshal(body, &m) == nil && len(m.ID) == 0 && m.Method == "notifications/cancelled"
}

type readCloser struct {
	io.Reader
	io.Closer
}
