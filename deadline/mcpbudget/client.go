package mcpbudget

import (
	"context"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// DefaultBudget is the budget a [Client] gives a request whose context
// carries no deadline (neither a [deadline.Deadline] nor a context
// deadline): 30 seconds. Change it with [WithDefaultBudget].
const DefaultBudget = 30 * time.Second

// ClientOption configures [NewClient], and through it the clients of every
// SDK adapter (deadlinemcp, deadlinemcpgo), which take these options.
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
	limiter       *overload.Limiter  // WithLimiter's, for policies with none
	throttle      *overload.Throttle // WithThrottle's, for policies with none
	err           error
}

func (c *clientConfig) fail(field string, value any, allowed string) {
	if c.err == nil {
		c.err = &deadline.PolicyError{Field: field, Value: value, Allowed: allowed}
	}
}

// WithPolicy sets the policy a request runs under ([deadline.Do]) when it
// does not choose its own ([WithRequestPolicy], [WithPolicyFunc]); see
// [Client.Policy] for the order. It does not apply to the handshake
// (initialize, server/discover), which runs under [deadline.DefaultPolicy]
// unless WithPolicyFunc chooses otherwise, so that a ceiling meant for
// tool calls cannot make the connection fail. The default is
// [deadline.DefaultPolicy]. When p.Name is empty, whichever policy
// applies, each call is named by [CallName]: "MCP tools/call search",
// "MCP tools/list".
//
// p.Retryable, when set, replaces the default classifier but never widens
// what is safe: a request that is not safe to repeat is sent once whatever
// it says, and a server's refusal ([RefusedError]) is never retried. An
// invalid p makes NewClient return its [*deadline.PolicyError].
func WithPolicy(p deadline.Policy) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.policy = p })
}

// WithPolicyFunc sets a function that chooses the policy of each request
// whose context carries none ([WithRequestPolicy]) from its MCP method
// ("tools/call", "resources/read", "initialize") and, for tools/call, the
// tool's name ("" for any other method), so that one client serves every
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
			c.fail("mcpbudget.WithDefaultBudget", d, "> 0")
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
// [overload.Limiter] per MCP server, shared by its methods and tools (the
// policy's Name, "MCP tools/call search" by default, keeps their latencies
// apart). An attempt takes a slot before it is sent, and waits for one only
// while it can still finish; a refused request is not sent and fails with
// a [*deadline.StopError] whose Reason is [deadline.ReasonLimited] or, its
// breaker open, [deadline.ReasonOpen]. A nil l adds nothing; one not built
// by [overload.NewLimiter] makes every request fail with a
// [*deadline.PolicyError].
func WithLimiter(l *overload.Limiter) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.limiter = l })
}

// WithThrottle sets the client-side throttling of every request whose
// policy has none ([deadline.Policy.Throttle]), the handshake's included:
// one [overload.Throttle] per MCP server, shared by its methods and tools.
// Once the server refuses most requests (errors marked
// [deadline.Overloaded]), a request is dropped on the client with the
// throttle's probability and fails with a [*deadline.StopError] whose
// Reason is [deadline.ReasonThrottled]. A nil t adds nothing; one not
// built by [overload.NewThrottle] makes every request fail with a
// [*deadline.PolicyError].
func WithThrottle(t *overload.Throttle) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.throttle = t })
}

// WithMetaKey sets the _meta key the client sends the budget under
// (default [MetaKey]). A key that breaks MCP's rules for _meta keys
// ([ValidKey]) makes NewClient return a [*deadline.PolicyError].
func WithMetaKey(key string) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		if !ValidKey(key) {
			c.fail("mcpbudget.WithMetaKey", key, KeyRule)
			return
		}
		c.key = key
	})
}

// WithIdempotentTools declares tools safe to repeat, by name, in addition
// to those whose annotations say so: for a server that sends no
// annotations, or a tool the caller knows better. An empty name makes
// NewClient return a [*deadline.PolicyError]. Calls add to the list.
func WithIdempotentTools(names ...string) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		for _, n := range names {
			if n == "" {
				c.fail("mcpbudget.WithIdempotentTools", n, "a tool name")
				return
			}
			if c.idempotent == nil {
				c.idempotent = make(map[string]bool)
			}
			c.idempotent[n] = true
		}
	})
}

type policyKey struct{}

// WithRequestPolicy returns a copy of ctx that carries p: every request
// sent with ctx through a client of any SDK adapter runs under p instead
// of the client's policy ([WithPolicy]), e.g. a step's own name, ceiling
// and attempts. p is validated when the request runs: an invalid one
// fails it with the [*deadline.PolicyError], without sending anything.
func WithRequestPolicy(ctx context.Context, p deadline.Policy) context.Context {
	return context.WithValue(ctx, policyKey{}, p)
}

// RequestPolicy returns the policy [WithRequestPolicy] stored in ctx.
func RequestPolicy(ctx context.Context) (deadline.Policy, bool) {
	p, ok := ctx.Value(policyKey{}).(deadline.Policy)
	return p, ok
}

// Client is the SDK-independent part of an MCP client: its options, the
// policy of each request and the budget it sends. An SDK adapter builds
// one with [NewClient] and asks it, per request, for the deadline
// ([Client.Deadline]), the policy ([Client.Policy]) and, per attempt, the
// _meta value ([Client.Meta]). It is safe for concurrent use; its
// configuration is fixed once created.
type Client struct {
	cfg   clientConfig
	names callNames
}

// callNames holds [CallName]'s names, so that a request's default name is
// built once per method and tool, not once per request: the client's
// allocations are counted per tool call. It keeps at most maxCallNames
// (tool names are the caller's: unbounded); past that, names are built
// per request.
type callNames struct {
	mu sync.RWMutex
	m  map[[2]string]string
}

const maxCallNames = 1024

func (n *callNames) get(method, tool string) string {
	k := [2]string{method, tool}
	n.mu.RLock()
	name, ok := n.m[k]
	n.mu.RUnlock()
	if ok {
		return name
	}
	name = CallName(method, tool)
	n.mu.Lock()
	if n.m == nil {
		n.m = make(map[[2]string]string)
	}
	if len(n.m) < maxCallNames {
		n.m[k] = name
	}
	n.mu.Unlock()
	return name
}

// NewClient returns a Client configured by opts. It checks the options
// once, here: an invalid policy ([WithPolicy]), WithDefaultBudget(d <= 0),
// an invalid _meta key ([WithMetaKey]) or an empty tool name
// ([WithIdempotentTools]) returns a nil Client and a
// [*deadline.PolicyError] naming the first problem. Nil options are
// ignored.
func NewClient(opts ...ClientOption) (*Client, error) {
	c := clientConfig{policy: deadline.DefaultPolicy(), defaultBudget: DefaultBudget, key: MetaKey}
	for _, o := range opts {
		if o != nil {
			o.applyClient(&c)
		}
	}
	if c.err == nil {
		c.err = c.policy.Validate()
	}
	if c.err != nil {
		return nil, c.err
	}
	return &Client{cfg: c}, nil
}

// Key returns the _meta key the client sends the budget under.
func (c *Client) Key() string { return c.cfg.key }

// IdempotentTool reports whether [WithIdempotentTools] named the tool.
func (c *Client) IdempotentTool(name string) bool { return c.cfg.idempotent[name] }

// Deadline returns the deadline a request sent with ctx runs under: the
// one [deadline.FromContext] finds (a [deadline.Deadline] stored in ctx, or
// ctx's own deadline, whichever ends first), else a new one of the
// default budget ([WithDefaultBudget]).
func (c *Client) Deadline(ctx context.Context) deadline.Deadline {
	if d, ok := deadline.FromContext(ctx); ok {
		return d
	}
	return deadline.New(c.cfg.defaultBudget)
}

// Policy returns the policy of one request, the first that applies:
//
//  1. the policy ctx carries ([WithRequestPolicy]);
//  2. the policy [WithPolicyFunc]'s function returns for method and tool;
//  3. for the handshake ([Handshake]), [deadline.DefaultPolicy];
//  4. the client's ([WithPolicy]).
//
// Whichever applies, a policy without a name is named by [CallName], one
// without a limiter gets [WithLimiter]'s (without a throttle
// [WithThrottle]'s), [WithHooks]' hooks are composed
// after its own, and its classifier is bounded by safe, which the adapter
// decides ([SafeMethod], the tool's hints, [Client.IdempotentTool]): a
// request that is not safe is never retried, and a safe one never on a
// server's refusal ([IsRefused]), whatever a custom classifier says. The
// policy is not validated here: [deadline.Do] does it.
func (c *Client) Policy(ctx context.Context, method, tool string, safe bool) deadline.Policy {
	p := c.choose(ctx, method, tool)
	if p.Name == "" {
		p.Name = c.names.get(method, tool)
	}
	if p.Limiter == nil {
		p.Limiter = c.cfg.limiter
	}
	if p.Throttle == nil {
		p.Throttle = c.cfg.throttle
	}
	p.Hooks = deadline.Compose(p.Hooks, c.cfg.hooks)
	switch custom := p.Retryable; {
	case !safe:
		p.Retryable = neverRetry
	case custom != nil:
		p.Retryable = func(err error) bool { return !IsRefused(err) && custom(err) }
	default:
		p.Retryable = deadline.IsRetryable
	}
	return p
}

func (c *Client) choose(ctx context.Context, method, tool string) deadline.Policy {
	if p, ok := RequestPolicy(ctx); ok {
		return p
	}
	if f := c.cfg.policyFunc; f != nil {
		if p, ok := f(method, tool); ok {
			return p
		}
	}
	if Handshake(method) {
		return deadline.DefaultPolicy()
	}
	return c.cfg.policy
}

func neverRetry(error) bool { return false }

// Meta returns the budget an attempt whose context is actx sends: what is
// left until actx's deadline, as [BudgetMs] writes it (1 when it has none
// or it has passed).
func Meta(actx context.Context) int64 {
	left := time.Duration(0)
	if end, ok := actx.Deadline(); ok {
		left = time.Until(end)
	}
	return BudgetMs(left)
}

// WithBudget returns a copy of meta with key set to the budget actx has
// left ([Meta]). meta itself is not changed.
func WithBudget(meta map[string]any, key string, actx context.Context) map[string]any {
	m := make(map[string]any, len(meta)+1)
	for k, v := range meta {
		m[k] = v
	}
	m[key] = Meta(actx)
	return m
}
