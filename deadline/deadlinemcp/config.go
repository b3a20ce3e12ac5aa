package deadlinemcp

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
)

// DefaultBudget is the budget a [Client] gives a request whose context
// carries no deadline (neither a [deadline.Deadline] nor a context
// deadline): 30 seconds. Change it with [WithDefaultBudget].
const DefaultBudget = 30 * time.Second

// DefaultMaxBudget is the largest budget a [Server] grants a request, and
// the budget of a request that arrives without one: 30 seconds. Change it
// with [WithMaxBudget].
const DefaultMaxBudget = admission.DefaultMaxBudget

// ClientOption configures [NewClient].
type ClientOption interface{ applyClient(*clientConfig) }

type clientOptionFunc func(*clientConfig)

func (f clientOptionFunc) applyClient(c *clientConfig) { f(c) }

type clientConfig struct {
	policy        deadline.Policy
	policyFunc    func(method, tool string) (deadline.Policy, bool)
	hooks         *deadline.Hooks
	defaultBudget time.Duration
	key           string
	idempotent    map[string]bool
	limiter       *deadline.Limiter // WithLimiter's, for policies with none
	err           error
}

func (c *clientConfig) fail(field string, value any, allowed string) {
	if c.err == nil {
		c.err = &deadline.PolicyError{Field: field, Value: value, Allowed: allowed}
	}
}

// WithPolicy sets the policy a request runs under ([deadline.Do]) when it
// does not choose its own ([WithRequestPolicy], [WithPolicyFunc]); see
// [Client] for the order. It does not apply to the handshake (initialize,
// server/discover), which runs under [deadline.DefaultPolicy] unless
// WithPolicyFunc chooses otherwise, so that a ceiling meant for tool calls
// cannot make Connect fail. The default is [deadline.DefaultPolicy]. When
// p.Name is empty, whichever policy applies, each call is named "MCP " and
// its method, a tool call "MCP " and its method and tool: "MCP tools/call
// search", "MCP tools/list" (as deadlinehttp names a call "HTTP GET"), so
// that a call span is told apart from its attempts' CLIENT spans, named
// "tools/call search" by MCP's semantic conventions.
//
// p.Retryable, when set, replaces the default classifier but never widens
// what is safe: a request that is not safe to repeat (see [Client]) is sent
// once whatever it says. An invalid p makes NewClient return its
// [*deadline.PolicyError].
func WithPolicy(p deadline.Policy) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.policy = p })
}

// WithPolicyFunc sets a function that chooses the policy of each request
// whose context carries none ([WithRequestPolicy]) from its MCP method
// ("tools/call", "resources/read", "initialize") and, for tools/call, the
// tool's name ("" for any other method), so that one Client serves every
// tool of an agent, each with its own name, attempts, ceiling and floor.
// It returns false to leave the request to the default: [WithPolicy]'s
// policy, or [deadline.DefaultPolicy] for the handshake (initialize,
// server/discover). Notifications are never passed to it: they are sent
// as they are, without a budget.
//
// f runs on every request, on the caller's goroutine; it must not block. A
// policy it returns is used as WithPolicy describes (the default name, the
// classifier bounded by what is safe), and an invalid one fails that
// request with its [*deadline.PolicyError], without sending anything. A
// nil f is ignored; a later WithPolicyFunc replaces an earlier one.
func WithPolicyFunc(f func(method, tool string) (deadline.Policy, bool)) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		if f != nil {
			c.policyFunc = f
		}
	})
}

// WithDefaultBudget sets the budget of a request whose context carries no
// deadline (see [deadline.FromContext]); the default is [DefaultBudget].
// d <= 0 makes NewClient return a [*deadline.PolicyError].
func WithDefaultBudget(d time.Duration) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		if d <= 0 {
			c.fail("deadlinemcp.WithDefaultBudget", d, "> 0")
			return
		}
		c.defaultBudget = d
	})
}

// WithHooks adds observer hooks to every call the client makes. They are
// composed after the policy's own hooks ([deadline.Policy.Hooks]), and both
// run after any hooks the request's context carries ([deadline.WithHooks]).
// A nil h adds nothing.
func WithHooks(h *deadline.Hooks) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.hooks = deadline.Compose(c.hooks, h) })
}

// WithLimiter sets the concurrency limiter of every request whose policy
// has none ([deadline.Policy.Limiter]), the handshake's included: one
// [deadline.Limiter] per MCP server, shared by its methods and tools (the
// policy's Name, "MCP tools/call search" by default, keeps their latencies
// apart). An attempt takes a slot before it is sent, and waits for one only
// while it can still finish; a refused request is not sent and fails with
// a [*deadline.StopError] whose Reason is [deadline.ReasonLimited] or, its
// breaker open, [deadline.ReasonOpen] (matching [deadline.ErrLimited] or
// [deadline.ErrDownstreamOpen], never context.DeadlineExceeded). A nil l
// adds nothing; one not built by [deadline.NewLimiter] makes every request
// fail with a [*deadline.PolicyError].
func WithLimiter(l *deadline.Limiter) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.limiter = l })
}

// WithMetaKey sets the _meta key the client sends the budget under
// (default [MetaKey]). A key that breaks MCP's rules for _meta keys, has no
// prefix, or has a prefix MCP reserves makes NewClient return a
// [*deadline.PolicyError].
func WithMetaKey(key string) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		if !validMetaKey(key) {
			c.fail("deadlinemcp.WithMetaKey", key, metaKeyRule)
			return
		}
		c.key = key
	})
}

const metaKeyRule = `an MCP _meta key "prefix/name" with a reverse-DNS prefix not reserved by MCP, e.g. "com.example/budget-ms"`

// WithIdempotentTools declares tools safe to repeat, by name, in addition
// to those whose annotations say so (see [Client]): for a server that
// sends no annotations, or a tool the caller knows better. An empty name
// makes NewClient return a [*deadline.PolicyError]. Calls add to the list.
func WithIdempotentTools(names ...string) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		for _, n := range names {
			if n == "" {
				c.fail("deadlinemcp.WithIdempotentTools", n, "a tool name")
				return
			}
			if c.idempotent == nil {
				c.idempotent = make(map[string]bool)
			}
			c.idempotent[n] = true
		}
	})
}

func newClientConfig(opts []ClientOption) clientConfig {
	c := clientConfig{policy: deadline.DefaultPolicy(), defaultBudget: DefaultBudget, key: MetaKey}
	for _, o := range opts {
		if o != nil {
			o.applyClient(&c)
		}
	}
	if c.err == nil {
		c.err = c.policy.Validate()
	}
	return c
}

type policyKey struct{}

// WithRequestPolicy returns a copy of ctx that carries p: every request
// sent with ctx through a [Client] runs under p instead of the client's
// policy ([WithPolicy]), e.g. a step's own name, ceiling and attempts. p
// is validated when the request runs: an invalid one fails it with the
// [*deadline.PolicyError], without sending anything.
func WithRequestPolicy(ctx context.Context, p deadline.Policy) context.Context {
	return context.WithValue(ctx, policyKey{}, p)
}

// RequestPolicy returns the policy [WithRequestPolicy] stored in ctx.
func RequestPolicy(ctx context.Context) (deadline.Policy, bool) {
	p, ok := ctx.Value(policyKey{}).(deadline.Policy)
	return p, ok
}

// ServerOption configures [NewServer].
type ServerOption interface{ applyServer(*serverConfig) }

type serverOptionFunc func(*serverConfig)

func (f serverOptionFunc) applyServer(c *serverConfig) { f(c) }

type serverConfig struct {
	limits    admission.Limits // WithMaxBudget, WithFloor (Limits.Validate checks them)
	key       string
	admission []func(ctx context.Context, method string, req mcp.Request, a Admission)
	err       error
}

func (c *serverConfig) fail(field string, value any, allowed string) {
	if c.err == nil {
		c.err = &deadline.PolicyError{Field: field, Value: value, Allowed: allowed}
	}
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
	return serverOptionFunc(func(c *serverConfig) { c.limits.MaxBudget = d })
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
	return serverOptionFunc(func(c *serverConfig) { c.limits.Floor = d })
}

// WithInboundMetaKey sets the _meta key the server reads the budget from
// (default [MetaKey]); it must match the clients' [WithMetaKey]. A key that
// breaks MCP's rules makes NewServer return a [*deadline.PolicyError].
func WithInboundMetaKey(key string) ServerOption {
	return serverOptionFunc(func(c *serverConfig) {
		if !validMetaKey(key) {
			c.fail("deadlinemcp.WithInboundMetaKey", key, metaKeyRule)
			return
		}
		c.key = key
	})
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
