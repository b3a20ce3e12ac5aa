package deadlinemcpgo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// ClientOption configures [NewClient]: the options of package mcpbudget
// ([mcpbudget.WithPolicy], [mcpbudget.WithPolicyFunc],
// [mcpbudget.WithLimiter], …), which the go-sdk adapter's client takes too.
type ClientOption = mcpbudget.ClientOption

// Client is the sending side for an mcp-go client: a transport wrapper
// ([Client.Transport]) under which every request, tools/call above all,
// runs under [deadline.Do], with one shared deadline, a lease per attempt
// carried to the server in the request's _meta ([mcpbudget.MetaKey]),
// refusal below the floor before anything is sent, budget-checked backoff,
// and retries only for requests that are safe to repeat:
//
//	c, err := deadlinemcpgo.NewClient(mcpbudget.WithPolicy(p))
//	t, err := transport.NewStreamableHTTP(url)
//	mc := client.NewClient(c.Transport(t))
//
// mcp-go has no client middleware, and its one injection point
// (tracing.MetaPropagator) runs for three methods: the transport is where
// every request passes, with its method, its params and its answer.
//
// # The deadline, the policy and the budget
//
// A request runs under the deadline its context carries
// ([mcpbudget.Client.Deadline]) and the policy [mcpbudget.Client.Policy]
// chooses (the context's, by method and tool, the handshake's, the
// client's), as the go-sdk adapter's client does. Each attempt's lease is
// put in the request's params._meta, whatever the params are (none
// included: Ping, ListTools of an empty request), when the transport
// writes the request; the caller's params are not changed. Notifications
// are sent as they are.
//
// # What is retried
//
// tools/call of a tool the session listed with readOnlyHint or
// idempotentHint (the wrapper reads every tools/list result that passes),
// or named in [mcpbudget.WithIdempotentTools]; the read-only methods
// ([mcpbudget.SafeMethod]); nothing else. Only on a transient failure: an
// attempt ended by its own ceiling, or a transport error other than a
// closed transport, a terminated session or missing authorization. Never
// on a JSON-RPC error the server answered, a server's refusal of the
// budget, or a tool result with isError. A retry is sent with an ID of
// its own ("<id>.<attempt>"), so that a late answer to an earlier attempt
// is not taken for it.
//
// # Cancellation
//
// When an attempt ends without an answer (its lease ended, or the
// transport failed after sending it), the wrapper sends the server
// notifications/cancelled for that attempt's request, on every transport (mcp-go itself sends none over HTTP, and none when only a
// lease, not the caller's context, ended), waiting at most
// [CancelWait] for it to be written. Over the in-process transport the
// server's handler runs under the attempt's context itself, so it ends
// with the lease without the notification.
//
// # Errors
//
// A call that stops without a result returns the [*deadline.StopError]
// (wrapped by mcp-go in a *transport.Error). errors.As reaches the last
// attempt's error: a [*mcpbudget.RefusedError] for a server's refusal,
// the same type the go-sdk adapter's client returns; a [*ResponseError]
// for any other JSON-RPC error, which keeps the code and data mcp-go's own
// error mapping drops, and unwraps to that mapping (errors.Is(err,
// mcp.ErrMethodNotFound) holds); a transport error.
type Client struct {
	core   *mcpbudget.Client
	key    []byte                               // core.Key()
	quoted []byte                               // core.Key() as a JSON string, written into every request
	hints  mcpbudget.ToolHints[budgetTransport] // per wrapped transport: one session each
	params sync.Pool                            // *budgetParams, reused by the requests of every transport
}

// CancelWait is how long a [Client] waits for notifications/cancelled to
// be written when an attempt's lease ended, before it goes on: a server
// that does not answer within it is not waited for.
const CancelWait = time.Second

// NewClient returns a Client configured by opts ([mcpbudget.NewClient]
// checks them, and its error is returned as it is). Nil options are
// ignored.
func NewClient(opts ...ClientOption) (*Client, error) {
	core, err := mcpbudget.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &Client{core: core, key: []byte(core.Key()), quoted: appendJSONString(nil, core.Key())}, nil
}

// ResponseError is a JSON-RPC error a server answered, other than a
// refusal of the budget, as a [Client]'s call returns it: the code, the
// message and the data as they came, and Err, mcp-go's own mapping of
// them (mcp.JSONRPCErrorDetails.AsError), which Unwrap returns.
type ResponseError struct {
	Code    int
	Message string
	Data    any
	Err     error
}

// Error returns mcp-go's message for the error.
func (e *ResponseError) Error() string { return e.Err.Error() }

// Unwrap returns mcp-go's mapping of the error.
func (e *ResponseError) Unwrap() error { return e.Err }

// AnswerError returns the error a [Client]'s call holds for a JSON-RPC
// error the server answered: a [*mcpbudget.RefusedError] for a refusal of
// the budget, else a [*ResponseError]. A nil d returns nil.
func AnswerError(d *mcp.JSONRPCErrorDetails) error {
	if d == nil {
		return nil
	}
	sdk := d.AsError()
	if r, ok := mcpbudget.NewRefusedError(int64(d.Code), d.Message, d.Data, sdk); ok {
		return r
	}
	return &ResponseError{Code: d.Code, Message: d.Message, Data: d.Data, Err: sdk}
}

// closed reports whether err says the transport or the session is gone,
// or the caller is not authorized: no retry on it can succeed.
func closed(err error) bool {
	return errors.Is(err, transport.ErrTransportClosed) || errors.Is(err, transport.ErrSessionTerminated) ||
		errors.Is(err, transport.ErrAuthorizationRequired) || errors.Is(err, transport.ErrOAuthAuthorizationRequired)
}

// mark marks a transient failure retryable; see [Client].
func mark(err error) error {
	if closed(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A closed transport or session fails every retry; a context error
		// is the lease's or the caller's, which deadline.Do classifies
		// itself (an attempt its own ceiling ended is retryable).
		return err
	}
	return deadline.Retryable(err)
}

// ToolName returns the tool a tools/call request's params name, whatever
// form mcp-go gives them (the params struct, the map of its modern
// protocol's requests, or the params a [Client]'s transport sends), "" for
// none.
func ToolName(params any) string {
	switch p := params.(type) {
	case *budgetParams:
		if p.tool != "" {
			return p.tool // named once, by the transport
		}
		return ToolName(p.inner)
	case mcp.CallToolParams:
		return p.Name
	case *mcp.CallToolParams:
		if p != nil {
			return p.Name
		}
	case map[string]json.RawMessage:
		if raw, ok := plainName(p); ok {
			return string(raw)
		}
		var name string
		_ = json.Unmarshal(p["name"], &name)
		return name
	case map[string]any:
		name, _ := p["name"].(string)
		return name
	}
	return ""
}

// plainName returns the tool name raw params hold as a JSON string with
// nothing escaped, unquoted; false for any other name.
func plainName(params map[string]json.RawMessage) ([]byte, bool) {
	raw := bytes.TrimSpace(params["name"])
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}

// listedTools is what a tools/list result says of its tools' hints.
type listedTools struct {
	Tools []struct {
		Name        string `json:"name"`
		Annotations *struct {
			ReadOnlyHint   *bool `json:"readOnlyHint"`
			IdempotentHint *bool `json:"idempotentHint"`
		} `json:"annotations"`
	} `json:"tools"`
}

// retryID is the ID of attempt n (n >= 2) of the request whose ID is id.
func retryID(id mcp.RequestId, n int) mcp.RequestId {
	return mcp.NewRequestId(fmt.Sprintf("%v.%d", id.Value(), n))
}
