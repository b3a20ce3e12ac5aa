package deadlinegrpc

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// DefaultBudget is the budget a [Client] gives an RPC whose context carries
// no deadline (neither a [deadline.Deadline] nor a context deadline): 30
// seconds. Change it with [WithDefaultBudget].
const DefaultBudget = 30 * time.Second

// ClientOption configures [NewClient].
type ClientOption interface{ applyClient(*clientConfig) }

type clientOptionFunc func(*clientConfig)

func (f clientOptionFunc) applyClient(c *clientConfig) { f(c) }

// clientConfig is a Client's settings, fixed by NewClient.
type clientConfig struct {
	policy        deadline.Policy
	policyFunc    func(method string) (deadline.Policy, bool)
	hooks         *deadline.Hooks
	defaultBudget time.Duration
	retryCodes    [codeCount]bool
	idempotent    map[string]bool
	files         *protoregistry.Files
	exempt        exemptSet
	logger        *slog.Logger
	limiter       *overload.Limiter  // WithLimiter's, for policies with none
	throttle      *overload.Throttle // WithThrottle's, for policies with none
	err           error              // the first invalid option, returned by NewClient
}

// codeCount bounds the gRPC status codes: 0 (OK) to 16 (UNAUTHENTICATED).
const codeCount = int(codes.Unauthenticated) + 1

func (c *clientConfig) fail(field string, value any, allowed string) {
	if c.err == nil {
		c.err = &deadline.PolicyError{Field: field, Value: value, Allowed: allowed}
	}
}

// WithPolicy sets the policy every RPC runs under ([deadline.Do]) unless a
// more specific one applies (see [NewClient] for the order). The default is
// [deadline.DefaultPolicy]. When p.Name is empty each call is named by the
// method without its leading slash, e.g. "pkg.Service/Get".
//
// p.Retryable, when set, replaces the default classifier but never widens
// what is safe: a method that is not declared safe to repeat is sent once,
// and a status whose pushback says "do not retry" is not retried, whatever
// it says. An invalid p makes NewClient return its [*deadline.PolicyError].
func WithPolicy(p deadline.Policy) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.policy = p })
}

// WithPolicyFunc sets a function that chooses the policy of an RPC from its
// full method name ("/pkg.Service/Method"). When it reports false, or is
// nil, the policy of [WithPolicy] (or the default) applies, and the client
// says so in a debug log ([WithLogger]). A policy it returns is validated
// per call: an invalid one fails that RPC with codes.Internal and a
// [*deadline.PolicyError], without sending anything.
func WithPolicyFunc(f func(method string) (deadline.Policy, bool)) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.policyFunc = f })
}

// WithDefaultBudget sets the budget of an RPC whose context carries no
// deadline (see [deadline.FromContext]); the default is [DefaultBudget].
// d <= 0 makes NewClient return a [*deadline.PolicyError].
func WithDefaultBudget(d time.Duration) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		if d <= 0 {
			c.fail("deadlinegrpc.WithDefaultBudget", d, "> 0")
			return
		}
		c.defaultBudget = d
	})
}

// WithRetryCodes replaces the status codes that count as a retryable
// failure of a method that is safe to repeat (default UNAVAILABLE and
// RESOURCE_EXHAUSTED). With no codes only an attempt ended by its own
// ceiling is retried. OK, or a code above UNAUTHENTICATED (16), makes
// NewClient return a [*deadline.PolicyError].
//
// A status carrying [RefusedTrailer] is never retried, whatever its code:
// the server refused the budget it was given, and the next attempt would
// have less.
func WithRetryCodes(cs ...codes.Code) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		var set [codeCount]bool
		for _, code := range cs {
			if code == codes.OK || int(code) >= codeCount {
				c.fail("deadlinegrpc.WithRetryCodes", code, "a gRPC status code from CANCELLED (1) to UNAUTHENTICATED (16)")
				return
			}
			set[code] = true
		}
		c.retryCodes = set
	})
}

// WithIdempotentMethods declares methods safe to repeat, by full method
// name ("/pkg.Service/Method"), in addition to those whose descriptor says
// so (see [NewClient]). A name not of that form makes NewClient return a
// [*deadline.PolicyError]. Calls add to the list.
func WithIdempotentMethods(methods ...string) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		for _, m := range methods {
			if !validMethod(m) {
				c.fail("deadlinegrpc.WithIdempotentMethods", m, `a full method name "/package.Service/Method"`)
				return
			}
			if c.idempotent == nil {
				c.idempotent = make(map[string]bool)
			}
			c.idempotent[m] = true
		}
	})
}

// WithProtoFiles sets the registry in which the client looks up a method's
// descriptor for its idempotency_level (default
// protoregistry.GlobalFiles, where generated code registers itself). A nil
// files keeps the default.
func WithProtoFiles(files *protoregistry.Files) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		if files != nil {
			c.files = files
		}
	})
}

// WithHooks adds observer hooks to every call the client makes. They are
// composed after the policy's own hooks ([deadline.Policy.Hooks]), and both
// run after any hooks the RPC's context carries ([deadline.WithHooks]). A
// nil h adds nothing.
func WithHooks(h *deadline.Hooks) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.hooks = deadline.Compose(c.hooks, h) })
}

// WithLimiter sets the concurrency limiter of every RPC whose policy has
// none ([deadline.Policy.Limiter]): one [overload.Limiter] per downstream
// (per ClientConn's target), shared by its methods (the policy's Name, the
// method by default, keeps their latencies apart). An attempt takes a slot
// before it is sent, and waits for one only while it can still finish; a
// refused RPC is not sent and fails with a [*deadline.StopError] whose
// Reason is [deadline.ReasonLimited] or, its breaker open,
// [deadline.ReasonOpen] (matching [deadline.ErrLimited] or
// [deadline.ErrDownstreamOpen], never context.DeadlineExceeded). A retryable
// RESOURCE_EXHAUSTED or UNAVAILABLE is marked [deadline.Overloaded]: an
// overload for the limiter and for client-side throttling
// ([WithThrottle]), not a failure for its breaker. A nil l adds
// nothing; one not built by [overload.NewLimiter] makes every RPC fail
// with a [*deadline.PolicyError].
func WithLimiter(l *overload.Limiter) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.limiter = l })
}

// WithThrottle sets the client-side throttling of every RPC whose policy
// has none ([deadline.Policy.Throttle]): one [overload.Throttle] per
// downstream, shared by its methods. Once the downstream refuses most RPCs
// (RESOURCE_EXHAUSTED or UNAVAILABLE, marked [deadline.Overloaded]), an RPC
// is dropped on the client with the throttle's probability and fails with
// a [*deadline.StopError] whose Reason is [deadline.ReasonThrottled]. A
// nil t adds nothing; one not built by [overload.NewThrottle] makes every
// RPC fail with a [*deadline.PolicyError].
func WithThrottle(t *overload.Throttle) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.throttle = t })
}

// WithLogger sets where the client reports what it decided without failing
// the RPC: at debug level a method that got the default policy or is not
// safe to repeat, at warn level (once per method) a grpc-go retryPolicy
// found in the service config by interceptors installed by hand (see
// [Client], "grpc-go's own retry"). The default
// is slog.Default(); a nil l keeps it.
func WithLogger(l *slog.Logger) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		if l != nil {
			c.logger = l
		}
	})
}

func newClientConfig(opts []ClientOption) clientConfig {
	c := clientConfig{
		policy:        deadline.DefaultPolicy(),
		defaultBudget: DefaultBudget,
		files:         protoregistry.GlobalFiles,
		exempt:        newExemptSet(),
	}
	c.retryCodes[codes.Unavailable] = true
	c.retryCodes[codes.ResourceExhausted] = true
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

// validMethod reports whether m is a full method name: "/service/method",
// both parts non-empty.
func validMethod(m string) bool {
	rest, ok := strings.CutPrefix(m, "/")
	if !ok {
		return false
	}
	svc, meth, ok := strings.Cut(rest, "/")
	return ok && svc != "" && meth != "" && !strings.Contains(meth, "/")
}

type policyKey struct{}

// WithRequestPolicy returns a copy of ctx that carries p: every RPC made
// with ctx through a [Client] runs under p, before any policy of
// [WithPolicyFunc] or [WithPolicy]. It mirrors deadlinehttp's per-request
// policy. p is validated when the RPC runs: an invalid one fails it with
// codes.Internal and a [*deadline.PolicyError], without sending anything.
func WithRequestPolicy(ctx context.Context, p deadline.Policy) context.Context {
	return context.WithValue(ctx, policyKey{}, p)
}

// RequestPolicy returns the policy [WithRequestPolicy] stored in ctx.
func RequestPolicy(ctx context.Context) (deadline.Policy, bool) {
	p, ok := ctx.Value(policyKey{}).(deadline.Policy)
	return p, ok
}

// formatMs writes d in whole milliseconds rounded up, 0 for nothing left.
func formatMs(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return strconv.FormatInt(int64(ms), 10)
}
