package deadlinehttp

import (
	"net/http"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// DefaultBudget is the budget a [Transport] gives a request whose context
// carries no deadline (neither a [deadline.Deadline] nor a context
// deadline): 30 seconds. Change it with [WithDefaultBudget].
const DefaultBudget = 30 * time.Second

// Option configures a [Transport].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is a Transport's settings, fixed by NewTransport.
type config struct {
	policy        deadline.Policy // WithPolicy's, its hooks composed with clientHooks
	policyFunc    func(*http.Request) (deadline.Policy, bool)
	hooks         *deadline.Hooks // WithHooks'
	clientHooks   *deadline.Hooks // hooks, then the transport's own
	defaultBudget time.Duration
	header        string
	retryStatus   map[int]bool
	retryBudget   *deadline.RetryBudget // WithRetryBudget's, for policies with none
	limiter       *overload.Limiter     // WithLimiter's, for policies with none
	throttle      *overload.Throttle    // WithThrottle's, for policies with none
	overload      int                   // WithOverloadCharge's
	err           error                 // the first invalid option, returned by every RoundTrip
}

func newConfig(opts []Option) config {
	c := config{
		policy:        deadline.DefaultPolicy(),
		defaultBudget: DefaultBudget,
		header:        DefaultHeader,
		retryStatus:   statusSet(defaultRetryStatuses),
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	c.clientHooks = deadline.Compose(c.hooks, transportHooks)
	c.policy.Hooks = deadline.Compose(c.policy.Hooks, c.clientHooks)
	if c.policy.RetryBudget == nil {
		c.policy.RetryBudget = c.retryBudget
	}
	if c.policy.Limiter == nil {
		c.policy.Limiter = c.limiter
	}
	if c.policy.Throttle == nil {
		c.policy.Throttle = c.throttle
	}
	if c.err == nil {
		c.err = c.policy.Validate()
	}
	return c
}

// transportHooks are the Transport's own hooks, composed after all others
// on every call: they drain a retryable answer once a retry is decided.
var transportHooks = &deadline.Hooks{Backoff: backoffHook}

func (c *config) fail(field string, value any, allowed string) {
	if c.err == nil {
		c.err = &deadline.PolicyError{Field: field, Value: value, Allowed: allowed}
	}
}

var defaultRetryStatuses = []int{
	http.StatusRequestTimeout,      // 408
	http.StatusTooManyRequests,     // 429
	http.StatusInternalServerError, // 500
	http.StatusBadGateway,          // 502
	http.StatusServiceUnavailable,  // 503
	http.StatusGatewayTimeout,      // 504
	StatusOverloaded,               // 529
}

func statusSet(codes []int) map[int]bool {
	m := make(map[int]bool, len(codes))
	for _, c := range codes {
		m[c] = true
	}
	return m
}

// WithPolicy sets the retry policy a request runs under ([deadline.Do])
// when it does not choose its own ([WithRequestPolicy], [WithPolicyFunc]):
// attempts, per-attempt ceiling, floor, backoff, classifier and hooks. The
// default is [deadline.DefaultPolicy] (3 attempts, no ceiling, 20ms floor,
// full-jitter backoff 50ms..400ms). When p.Name is empty each call is named
// "HTTP " and the request's method, e.g. "HTTP GET".
//
// p.Retryable, when set, replaces the default classifier
// ([deadline.IsRetryable]) but never widens what is safe: a request that is
// not idempotent ([IsIdempotent]) or whose body cannot be replayed is not
// retried whatever it says. p.Hooks observe the calls made under p only;
// [WithHooks] observes every call. An invalid p makes every RoundTrip
// return its [*deadline.PolicyError] without sending anything.
func WithPolicy(p deadline.Policy) Option {
	return optionFunc(func(c *config) { c.policy = p })
}

// WithPolicyFunc sets a function that chooses the policy of each request
// whose context carries none ([WithRequestPolicy]): by route, host or
// method, so that one Transport (and one http.Client) serves every step of
// a service, each with its own name, attempts, ceiling and floor. It
// returns false to leave the request to [WithPolicy]'s policy. See
// [Transport] for the precedence and how hooks compose.
//
// f runs on every RoundTrip, on the caller's goroutine; it must not modify
// the request. A policy it returns is used as [WithPolicy] describes (the
// default name, the classifier bounded by what is safe), and an invalid one
// makes that RoundTrip return its [*deadline.PolicyError] without sending
// anything. A nil f is ignored.
func WithPolicyFunc(f func(req *http.Request) (deadline.Policy, bool)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.policyFunc = f
		}
	})
}

// WithDefaultBudget sets the budget of a request whose context carries no
// deadline (see [deadline.FromContext]); the default is [DefaultBudget].
// d <= 0 makes every RoundTrip return a [*deadline.PolicyError].
func WithDefaultBudget(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.fail("deadlinehttp.WithDefaultBudget", d, "> 0")
			return
		}
		c.defaultBudget = d
	})
}

// WithHeader sets the name of the request header that carries each
// attempt's granted lease (default [DefaultHeader]). An empty name disables
// sending it. A name that is not an HTTP token (RFC 9110 §5.6.2) makes every
// RoundTrip return a [*deadline.PolicyError].
func WithHeader(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" && !isToken(name) {
			c.fail("deadlinehttp.WithHeader", name, `an HTTP token (letters, digits and !#$%&'*+-.^_|~), or "" to disable`)
			return
		}
		c.header = name
	})
}

// WithRetryStatuses replaces the response status codes that count as a
// retryable failure (default 408, 429, 500, 502, 503, 504, and 529,
// [StatusOverloaded]). With no codes every response is returned as it is. A code outside 100..599 makes every
// RoundTrip return a [*deadline.PolicyError].
//
// A 504 carrying [RefusedHeader] is never retried: the server refused the
// budget it was given, and the next attempt would have less.
func WithRetryStatuses(codes ...int) Option {
	return optionFunc(func(c *config) {
		for _, code := range codes {
			if code < 100 || code > 599 {
				c.fail("deadlinehttp.WithRetryStatuses", code, "an HTTP status code in 100..599")
				return
			}
		}
		c.retryStatus = statusSet(codes)
	})
}

// WithHooks adds observer hooks to every call the transport makes, whatever
// policy the request runs under. They are composed after that policy's own
// hooks ([deadline.Policy.Hooks]), and both run after any hooks the
// request's context carries ([deadline.WithHooks]). A nil h adds nothing.
func WithHooks(h *deadline.Hooks) Option {
	return optionFunc(func(c *config) { c.hooks = deadline.Compose(c.hooks, h) })
}

// WithRetryBudget sets the retry budget of every request whose policy has
// none ([deadline.Policy.RetryBudget]): one budget shared by every call the
// Transport makes, so that a fleet of callers does not multiply the load on
// a failing downstream. Use one Transport (or one budget) per downstream.
// Every first attempt counts as a deposit and every retry asks the budget
// before its wait; a denied retry stops the call with
// [deadline.ReasonRetryBudget], and the last answer is the response, as for
// any stop on a retryable answer ([StopOf] tells why). A policy that has its
// own budget keeps it. A nil b adds nothing; one not built by
// [deadline.NewRetryBudget] makes every RoundTrip return a
// [*deadline.PolicyError].
func WithRetryBudget(b *deadline.RetryBudget) Option {
	return optionFunc(func(c *config) { c.retryBudget = b })
}

// WithLimiter sets the concurrency limiter of every request whose policy
// has none ([deadline.Policy.Limiter]): one [overload.Limiter] per
// downstream, shared by every route the Transport calls there (the
// policy's Name, "HTTP GET" by default, keeps their latencies apart). An
// attempt takes a slot before it is sent, and waits for one only while it
// can still finish; a refused request gets no response and a
// [*deadline.StopError] whose Reason is [deadline.ReasonLimited] (its queue
// full, or it could not finish from its place) or [deadline.ReasonOpen]
// (its breaker open), matching [deadline.ErrLimited] or
// [deadline.ErrDownstreamOpen], never context.DeadlineExceeded. A 429, 503
// or 529 answer is marked [deadline.Overloaded]: an overload for the
// limiter and for client-side throttling ([WithThrottle]), not a failure
// for its breaker. Any other 4xx but 408 is
// an answer given without the work ([overload.OutcomeAnswered], through
// [deadline.Policy.Answered] unless the policy sets its own): a success for
// the breaker, no latency for the limit. A policy that has its own
// limiter keeps it. A nil l adds nothing; one not built by
// [overload.NewLimiter] makes every RoundTrip return a
// [*deadline.PolicyError].
func WithLimiter(l *overload.Limiter) Option {
	return optionFunc(func(c *config) { c.limiter = l })
}

// WithThrottle sets the client-side throttling of every request whose
// policy has none ([deadline.Policy.Throttle]): one [overload.Throttle] per
// downstream, shared by every route the Transport calls there. Once the
// downstream refuses most requests (429, 503 and 529 answers, marked
// [deadline.Overloaded], and requests cut before an answer), a request is
// dropped on the client with the throttle's probability and gets no
// response and a [*deadline.StopError] whose Reason is
// [deadline.ReasonThrottled], matching [deadline.ErrThrottled]. With
// [WithOverloadCharge], an overload answer without a delay also charges
// the throttle its n refused requests. A policy that has its own throttle
// keeps it. A nil t adds nothing; one not built by [overload.NewThrottle]
// makes every RoundTrip return a [*deadline.PolicyError].
func WithThrottle(t *overload.Throttle) Option {
	return optionFunc(func(c *config) { c.throttle = t })
}

// WithOverloadCharge makes a server's overload signal draw the request's
// retry budget down faster: on a 429, 503 or 529 ([StatusOverloaded])
// answer that carries no valid delay (Retry-After, [RetryAfterMsHeader] or
// [AzureRetryAfterMsHeader]), n tokens are charged to the budget the
// request runs under ([deadline.RetryBudget.Charge]), on top of the one the
// retry itself would take, so that every caller sharing the budget backs
// off at once (and, with a throttle, [WithThrottle], n refused requests to
// it). A delay is the server's own answer to when to come back, and is not
// charged; nor is a 503 that sheds the request from a standing admission
// queue ([RefusedHeader] "reason=standing_queue": the server's admission
// choosing whom to serve, not a downstream failing). It applies only to a
// request that has a budget ([WithRetryBudget]
// or its policy's) and to statuses that count as retryable
// ([WithRetryStatuses]). The default, 0, charges nothing; n < 0 makes every
// RoundTrip return a [*deadline.PolicyError].
func WithOverloadCharge(n int) Option {
	return optionFunc(func(c *config) {
		if n < 0 {
			c.fail("deadlinehttp.WithOverloadCharge", n, ">= 0 (tokens charged per overload answer; 0: none)")
			return
		}
		c.overload = n
	})
}

// isToken reports whether s is an RFC 9110 token, the syntax of a field name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
