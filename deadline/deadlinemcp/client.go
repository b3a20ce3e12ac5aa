package deadlinemcp

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// Client is the sending side: an MCP client middleware under which every
// request, tools/call above all, runs under [deadline.Do], with one shared
// deadline, a lease per attempt carried to the server in the request's
// _meta ([MetaKey]), refusal below the floor before anything is sent,
// budget-checked backoff, and retries only for requests that are safe to
// repeat. Create one with [NewClient] and install it on an mcp.Client:
//
//	c, err := deadlinemcp.NewClient(opts...)
//	client := mcp.NewClient(impl, nil)
//	client.AddSendingMiddleware(c.Middleware())
//
// It is safe for concurrent use by any number of sessions; its
// configuration is fixed once created.
//
// # The deadline and the policy
//
// A request runs under the [deadline.Deadline] found in its context by
// [deadline.FromContext] (one stored by [deadline.NewContext], or the
// context's own deadline, whichever ends first), so every call made while
// handling one run spends the same budget, over HTTP, gRPC and MCP alike. A
// context with neither gets a new Deadline of [DefaultBudget]
// ([WithDefaultBudget]). Its policy is the first that applies:
//
//  1. the policy its context carries ([WithRequestPolicy]);
//  2. the policy [WithPolicyFunc]'s function returns for its method and
//     tool;
//  3. for the handshake (initialize, server/discover),
//     [deadline.DefaultPolicy]: no ceiling, so it is sent with what is left
//     of the deadline, whatever ceiling the tool calls have;
//  4. the client's ([WithPolicy], default [deadline.DefaultPolicy]).
//
// Notifications (notifications/initialized, notifications/cancelled, …)
// get none of them: they are sent as they are, without a budget.
//
// # Each attempt
//
// Attempt n is one JSON-RPC request whose context is the attempt's: its
// deadline is the attempt's lease, and the lease is what the request's
// _meta carries under [MetaKey] (whole milliseconds, rounded up, at least
// 1, measured as the request is sent), so the server's [Server] middleware
// can make it its handler's deadline. The caller's params are not copied:
// their _meta is replaced for each attempt by a map holding its members
// and the budget, and put back when the call returns, so one params value
// must not be sent by two calls at once (the SDK itself fills in params'
// arguments and _meta). That map is the Client's, reused by a later call
// once this one returns (the SDK has written the request by then): a
// middleware that keeps what GetMeta returns past the call must copy it.
// A request sent without params (ListTools(ctx, nil), Ping(ctx, nil),
// every list method) is given empty params of its method's type, so it
// carries its lease too; without them the server would admit it with its
// own maximum.
//
// When an attempt's lease ends before the answer, the SDK stops waiting,
// and sends the server MCP's notifications/cancelled for that request (the
// go-sdk does so by itself whenever the context of a call ends), so the
// server's handler sees its context canceled and stops working for a
// caller who has gone: over the in-memory and stdio transports, and over a
// stateful streamable HTTP server. A stateless streamable HTTP server
// (mcp.StreamableHTTPOptions.Stateless) serves each POST in a session of
// its own, so the notification lands on a new session and cancels nothing;
// there the handler is ended by the server's [Server] middleware (at the
// lease, its deadline; and when the client drops its POST if the SDK's
// handler is served behind [Server.HTTPHandler]), or by the server's
// option mcp.StreamableHTTPOptions.PropagateRequestCancellation (the
// handler's context ends with the client's POST; go-sdk v1.8.0 applies it
// to protocol 2026-07-28 only, its clients' default). Set one of them on
// such a server.
//
// # What is retried
//
// A request is retried only if it is safe to repeat, the MCP counterpart of
// RFC 9110's safe and idempotent methods:
//
//   - tools/call of a tool whose annotations, as the server listed them in
//     tools/list, say readOnlyHint or idempotentHint; or a tool named in
//     [WithIdempotentTools]. The client learns the annotations by watching
//     the tools/list results of each session it serves (every page), so an
//     agent that lists its tools before calling them, as agents do, gets
//     them without another request. A tool the session has not listed, or
//     listed without annotations, is not safe: it is called once.
//   - the read-only methods server/discover, ping, tools/list, prompts/list, prompts/get,
//     resources/list, resources/templates/list, resources/read and
//     completion/complete.
//
// Every other request (initialize, resources/subscribe, …) is sent once.
//
// A request that may be retried is retried only on a transient failure: an
// attempt ended by its own ceiling ([deadline.Policy.AttemptTimeout]), a
// transport's rejection (the streamable HTTP transport answers an HTTP 429,
// 500, 502, 503 or 504 with JSON-RPC code -32005, "rejected by transport")
// or another transport error. Not retried: a JSON-RPC error the server
// answered (the request reached it and was handled: a bad argument, an
// unknown tool, a handler error, a refusal of the budget
// [CodeBudgetRefused]); a closed connection or a missing session
// (mcp.ErrConnectionClosed, mcp.ErrSessionMissing: no retry on the same
// session can succeed); and a tool result with isError true, which is an
// answer, not a failure of the call: the tool ran and said what went
// wrong, for the model to read.
//
// # Notifications and errors
//
// Notifications are sent as they are, without a budget. A call that stops
// without a result returns the [*deadline.StopError] (errors.As and
// errors.Is reach the last attempt's error, a *jsonrpc.Error included, and
// for a server's refusal the [*mcpbudget.RefusedError] around it, the type
// an mcp-go client's caller finds too); an
// invalid request policy returns its [*deadline.PolicyError], nothing sent.
type Client struct {
	core  *mcpbudget.Client
	tools mcpbudget.ToolHints[mcp.ClientSession]
	metas sync.Pool // map[string]any: the _meta of a call's attempts, reused once the call returns
}

// maxKeptMeta is the most members a _meta map the Client reuses may hold:
// a larger one is left to the garbage collector.
const maxKeptMeta = 64

// NewClient returns a Client configured by opts. It checks the options
// once, here: an invalid policy ([WithPolicy]), WithDefaultBudget(d <= 0),
// an invalid _meta key ([WithMetaKey]) or an empty tool name
// ([WithIdempotentTools]) returns a nil Client and a
// [*deadline.PolicyError] naming the first problem. Nil options are
// ignored.
func NewClient(opts ...ClientOption) (*Client, error) {
	core, err := mcpbudget.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &Client{core: core}, nil
}

// Middleware returns the sending middleware; see [Client]. Install it with
// mcp.Client.AddSendingMiddleware. The SDK runs middleware from the outside
// in: in one AddSendingMiddleware call, those to its left see each call
// once and those to its right each attempt; a later AddSendingMiddleware
// call wraps everything added before it.
func (c *Client) Middleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if mcpbudget.Notification(method) {
				return next(ctx, method, req)
			}
			return c.send(ctx, method, req, next)
		}
	}
}

// ToolSafe reports whether the client may call the tool name of session
// more than once: [WithIdempotentTools] lists it, or the session's
// tools/list said readOnlyHint or idempotentHint for it.
func (c *Client) ToolSafe(session *mcp.ClientSession, name string) bool {
	return c.core.IdempotentTool(name) || c.tools.Safe(session, name)
}

func (c *Client) send(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	d := c.core.Deadline(ctx)
	session, _ := req.GetSession().(*mcp.ClientSession)
	params := ensureParams(method, req)
	tool := ""
	if ct, ok := params.(*mcp.CallToolParams); ok {
		tool = ct.Name
	}
	p := c.core.Policy(ctx, method, tool, c.safe(session, method, tool))

	var orig, meta map[string]any
	if params != nil {
		orig = params.GetMeta()
		meta, _ = c.metas.Get().(map[string]any)
		if meta == nil {
			meta = make(map[string]any, len(orig)+1)
		}
		defer func() {
			params.SetMeta(orig)
			if len(meta) <= maxKeptMeta {
				clear(meta) // nothing of the caller's is kept
				c.metas.Put(meta)
			}
		}()
	}
	res, err := deadline.Do(ctx, d, p, func(actx context.Context, _ deadline.AttemptInfo) (mcp.Result, error) {
		if params != nil {
			// The caller's members and this attempt's budget, whatever an
			// earlier attempt's middleware added (a trace context). The
			// SDK has marshalled the request when next returns, so the
			// map is the Client's again then.
			clear(meta)
			maps.Copy(meta, orig)
			meta[c.core.Key()] = mcpbudget.Meta(actx)
			params.SetMeta(meta)
		}
		r, err := next(actx, method, req)
		return r, mark(refused(err))
	})
	if err != nil {
		return nil, err
	}
	if l, ok := res.(*mcp.ListToolsResult); ok && session != nil {
		for _, t := range l.Tools {
			if t != nil {
				a := t.Annotations
				c.tools.Observe(session, t.Name, a != nil && a.ReadOnlyHint, a != nil && a.IdempotentHint)
			}
		}
	}
	return res, nil
}

// safe reports whether a request may be sent more than once.
func (c *Client) safe(session *mcp.ClientSession, method, tool string) bool {
	if method == "tools/call" {
		return tool != "" && c.ToolSafe(session, tool)
	}
	return mcpbudget.SafeMethod(method)
}

// codeRejected is the go-sdk's JSON-RPC code for a request its transport
// rejected without a response from the server: the streamable HTTP
// transport's answer to an HTTP 429, 500, 502, 503 or 504.
const codeRejected = -32005

// mark marks a transient failure retryable; see [Client].
func mark(err error) error {
	if err == nil || !transient(err) {
		return err
	}
	return deadline.Retryable(err)
}

// transient reports whether an attempt's error is a transport failure that
// another attempt may not meet.
func transient(err error) bool {
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A closed session fails every retry; a context error is the
		// lease's or the caller's, which deadline.Do classifies itself
		// (an attempt its own ceiling ended is retryable).
		return false
	}
	if we, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return we.Code == codeRejected
	}
	return true
}

// refused returns err, a [*mcpbudget.RefusedError] around it when it is a
// server's refusal of the budget ([CodeBudgetRefused]), so that the
// caller's errors.As finds the same type whichever SDK the client is
// written with, and errors.As still reaches the *jsonrpc.Error.
func refused(err error) error {
	if we, ok := errors.AsType[*jsonrpc.Error](err); ok {
		if r, ok := mcpbudget.NewRefusedError(we.Code, we.Message, we.Data, err); ok {
			return r
		}
	}
	return err
}

// ensureParams returns req's params, first giving a request sent without
// any (ListTools(ctx, nil), Ping(ctx, nil), …) empty params of its
// method's type, so that its _meta can carry the budget: a request without
// params would reach the server without a lease, and be admitted with the
// server's own maximum. It returns nil, leaving req as it is, for a
// request whose params type it cannot tell (an unknown method sent
// through the mcp.Params interface): that request goes without a budget.
func ensureParams(method string, req mcp.Request) mcp.Params {
	if p := req.GetParams(); !isNil(p) {
		return p
	}
	switch r := req.(type) {
	case *mcp.ClientRequest[mcp.Params]: // what every ClientSession method sends
		if p := newParams(method); p != nil {
			r.Params = p
			return p
		}
		return nil
	case *mcp.ServerRequest[mcp.Params]:
		if p := newParams(method); p != nil {
			r.Params = p
			return p
		}
		return nil
	}
	// A request typed by its params (mcp.CallCustomMethod's
	// *ClientRequest[P]): a new P.
	v := reflect.ValueOf(req)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("Params")
	if !f.IsValid() || !f.CanSet() || f.Kind() != reflect.Pointer || f.Type().Elem().Kind() != reflect.Struct {
		return nil
	}
	n := reflect.New(f.Type().Elem())
	p, ok := n.Interface().(mcp.Params)
	if !ok {
		return nil
	}
	f.Set(n)
	return p
}

// newParams returns empty params of the type the SDK sends for method, nil
// for a method it does not know, and for initialize, whose params the SDK
// always fills in (and requires: empty ones would make it panic). Requests whose params MCP requires (a
// tool's or a prompt's name, a URI) get them empty too: the server answers
// them with its error for the missing field, as it would without params.
func newParams(method string) mcp.Params {
	switch method {
	case "ping":
		return &mcp.PingParams{}
	case "server/discover":
		return &mcp.DiscoverParams{}
	case "tools/list":
		return &mcp.ListToolsParams{}
	case "tools/call":
		return &mcp.CallToolParams{Arguments: map[string]any{}}
	case "prompts/list":
		return &mcp.ListPromptsParams{}
	case "prompts/get":
		return &mcp.GetPromptParams{}
	case "resources/list":
		return &mcp.ListResourcesParams{}
	case "resources/templates/list":
		return &mcp.ListResourceTemplatesParams{}
	case "resources/read":
		return &mcp.ReadResourceParams{}
	case "resources/subscribe":
		return &mcp.SubscribeParams{}
	case "resources/unsubscribe":
		return &mcp.UnsubscribeParams{}
	case "subscriptions/listen":
		return &mcp.SubscriptionsListenParams{}
	case "completion/complete":
		return &mcp.CompleteParams{}
	case "logging/setLevel":
		//lint:ignore SA1019 the SDK still sends it during SEP-2577's deprecation window, and it must carry its lease
		return &mcp.SetLoggingLevelParams{}
	// Requests a server sends its client.
	case "roots/list":
		//lint:ignore SA1019 the SDK still sends it during SEP-2577's deprecation window, and it must carry its lease
		return &mcp.ListRootsParams{}
	case "sampling/createMessage":
		//lint:ignore SA1019 the SDK still sends it during SEP-2577's deprecation window, and it must carry its lease
		return &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{}}
	case "elicitation/create":
		return &mcp.ElicitParams{}
	}
	return nil
}

// isNil reports whether p is nil or a nil pointer in an interface (the SDK
// hands a request without params as a typed nil).
func isNil(p mcp.Params) bool {
	if p == nil {
		return true
	}
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
