package deadlinemcp

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// DefaultBudget is the budget a [Client] gives a request whose context
// carries no deadline (neither a [deadline.Deadline] nor a context
// deadline): 30 seconds, [mcpbudget.DefaultBudget]. Change it with
// [WithDefaultBudget].
const DefaultBudget = mcpbudget.DefaultBudget

// DefaultMaxBudget is the largest budget a [Server] grants a request, and
// the budget of a request that arrives without one: 30 seconds. Change it
// with [WithMaxBudget].
const DefaultMaxBudget = admission.DefaultMaxBudget

// ClientOption configures [NewClient]. It is [mcpbudget.ClientOption]: the
// options of a client are the same whichever SDK adapter takes them, and
// the functions below return mcpbudget's.
type ClientOption = mcpbudget.ClientOption

// WithPolicy is [mcpbudget.WithPolicy]: the policy a request runs under
// when it does not choose its own; see [Client] for the order.
func WithPolicy(p deadline.Policy) ClientOption { return mcpbudget.WithPolicy(p) }

// WithPolicyFunc is [mcpbudget.WithPolicyFunc]: a function that chooses
// the policy of each request from its MCP method and, for tools/call, the
// tool's name.
func WithPolicyFunc(f func(method, tool string) (deadline.Policy, bool)) ClientOption {
	return mcpbudget.WithPolicyFunc(f)
}

// WithDefaultBudget is [mcpbudget.WithDefaultBudget]: the budget of a
// request whose context carries no deadline (default [DefaultBudget]).
func WithDefaultBudget(d time.Duration) ClientOption { return mcpbudget.WithDefaultBudget(d) }

// WithHooks is [mcpbudget.WithHooks]: observer hooks added to every call.
func WithHooks(h *deadline.Hooks) ClientOption { return mcpbudget.WithHooks(h) }

// WithLimiter is [mcpbudget.WithLimiter]: the concurrency limiter of every
// request whose policy has none, the handshake's included.
func WithLimiter(l *overload.Limiter) ClientOption { return mcpbudget.WithLimiter(l) }

// WithThrottle is [mcpbudget.WithThrottle]: the client-side throttling of
// every request whose policy has none, the handshake's included.
func WithThrottle(t *overload.Throttle) ClientOption { return mcpbudget.WithThrottle(t) }

// WithMetaKey is [mcpbudget.WithMetaKey]: the _meta key the client sends
// the budget under (default [MetaKey]).
func WithMetaKey(key string) ClientOption { return mcpbudget.WithMetaKey(key) }

// WithIdempotentTools is [mcpbudget.WithIdempotentTools]: tools declared
// safe to repeat, by name, besides those whose annotations say so.
func WithIdempotentTools(names ...string) ClientOption {
	return mcpbudget.WithIdempotentTools(names...)
}

// WithRequestPolicy is [mcpbudget.WithRequestPolicy]: every request sent
// with the returned context runs under p, through a client of either SDK
// adapter.
func WithRequestPolicy(ctx context.Context, p deadline.Policy) context.Context {
	return mcpbudget.WithRequestPolicy(ctx, p)
}

// RequestPolicy returns the policy [WithRequestPolicy] stored in ctx.
func RequestPolicy(ctx context.Context) (deadline.Policy, bool) { return mcpbudget.RequestPolicy(ctx) }

// ServerOption configures [NewServer].
type ServerOption interface{ applyServer(*serverConfig) }

type serverOptionFunc func(*serverConfig)

func (f serverOptionFunc) applyServer(c *serverConfig) { f(c) }

type serverConfig struct {
	mcpbudget.ServerBase // WithMaxBudget, WithFloor, WithInboundMetaKey
	admission            []func(ctx context.Context, method string, req mcp.Request, a Admission)
}

// WithMaxBudget sets the server's own maximum (default
// [DefaultMaxBudget]). An inbound budget larger than d is clamped to d: a
// client can never grant the server more time than it allows. A request
// without a budget gets d. d <= 0 is invalid, and so is a d at or below
// the floor (see [NewServer]).
//
// It sets [admission.Limits].MaxBudget: the rule and its check are shared
// by every transport.
func WithMaxBudget(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.Limits.MaxBudget = d })
}

// WithFloor sets the server's floor (default 0). A request whose effective
// budget is at or below d is answered at once with the JSON-RPC error
// [CodeBudgetRefused], and its handler is not called. With the default 0
// only a budget already spent is refused. d < 0 is invalid, and so is a d
// at or above the maximum (see [NewServer]).
//
// It sets [admission.Limits].Floor: the rule and its check are shared
// by every transport.
func WithFloor(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.Limits.Floor = d })
}

// WithInboundMetaKey sets the _meta key the server reads the budget from
// (default [MetaKey]); it must match the clients' [WithMetaKey]. A key that
// breaks MCP's rules makes NewServer return a [*deadline.PolicyError].
func WithInboundMetaKey(key string) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.SetKey("deadlinemcp.WithInboundMetaKey", key) })
}

// WithAdmission adds a function called once per inbound request, on its
// goroutine, with what the server decided ([Admission]) before the handler
// runs or the refusal is returned. ctx is the request's context as it
// arrived; method is the MCP method ("tools/call"), req the request. Use
// it for telemetry. Calls add functions, called in order; a nil f adds
// nothing.
func WithAdmission(f func(ctx context.Context, method string, req mcp.Request, a Admission)) ServerOption {
	return serverOptionFunc(func(c *serverConfig) {
		if f != nil {
			c.admission = append(c.admission, f)
		}
	})
}
