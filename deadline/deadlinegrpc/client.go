package deadlinegrpc

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/deadlinebudget/budget/deadline"
)

// Client holds the client interceptors: every RPC made through them runs
// under [deadline.Do], with one shared deadline, a lease per attempt carried
// on the wire as grpc-timeout, refusal below the floor, budget-checked
// backoff, the server's pushback, and retries only for methods that are
// safe to repeat. Create one with [NewClient]; it is safe for concurrent
// use, and its configuration is fixed once created.
//
// # The deadline and the policy
//
// An RPC runs under the [deadline.Deadline] found in its context by
// [deadline.FromContext] (one stored by [deadline.NewContext], or the
// context's own deadline, whichever ends first), so every call made while
// handling one request spends the same budget, over HTTP and gRPC alike. A
// context with neither gets a new Deadline of [DefaultBudget]
// ([WithDefaultBudget]).
//
// Its policy is the first of: the context's ([WithRequestPolicy]), the
// function's for its full method name ([WithPolicyFunc]), the client's
// ([WithPolicy]), [deadline.DefaultPolicy].
//
// # Each attempt
//
// Attempt n is one physical RPC whose context is the attempt's context: its
// deadline is the attempt's lease, so grpc-go sends that lease as
// grpc-timeout (never the whole remaining budget), and the server sees it
// as its context's deadline. An instrumented connection (otelgrpc's stats
// handler) records one CLIENT span per attempt, a child of the attempt's
// context.
//
// # What is retried
//
// A method is retried only if it is safe to repeat: listed by
// [WithIdempotentMethods], or declared so by its descriptor
// ([IsIdempotent]: idempotency_level NO_SIDE_EFFECTS or IDEMPOTENT, looked
// up in [WithProtoFiles]). Every other method is sent once whatever
// happens. For a method that may be retried, an attempt fails retryably on a
// status whose code is in [WithRetryCodes] (default UNAVAILABLE and
// RESOURCE_EXHAUSTED) and that carries no [RefusedTrailer] (but a
// RESOURCE_EXHAUSTED whose RefusedTrailer says "reason=standing_queue", a
// shed: retried, marked [deadline.Shed]), and on an
// attempt ended by its own ceiling ([deadline.Policy.AttemptTimeout]).
// A stream is never retried once a response message or its headers reached
// the caller (see [Client.StreamInterceptor]).
//
// With a policy that hedges ([deadline.Policy.Hedge]), a unary method that
// is safe to repeat is hedged through [deadline.DoHedged]: when an attempt
// has had no answer for the hedge delay, the same request is sent beside
// it, in its own lease; the first success wins, and the others are
// canceled. Each attempt has its own reply, headers, trailer and peer; the
// winner's are copied into the caller's. A server stream of a method safe
// to repeat is hedged the same way up to its first message (see
// [Client.StreamInterceptor]). Every other RPC (a method not safe to
// repeat, a client or bidirectional stream, a reply that is not a proto
// message) is not hedged, and is sent or retried as without hedging.
//
// An RPC of a long-lived method ([WithExemptMethods]: the health Watch,
// ORCA and reflection streams by default) made without any deadline is
// sent once as it is, without a budget.
//
// The server's [PushbackTrailer] on a retryable failure replaces the
// backoff ([deadline.RetryAfter]) and is never shortened; when it does not
// fit in what is left above the floor the call stops at once with
// [deadline.ReasonRetryAfterTooLong]. A negative or malformed pushback
// means "do not retry" ([PushbackError]).
//
// # Errors
//
// When the call stops without a result the interceptor returns an
// [*Error]: the last attempt's status unchanged (code, message, details),
// or one made from the reason when no attempt produced a status; [StopOf]
// (errors.As) reaches the [*deadline.StopError] that says why.
//
// # grpc-go's own retry
//
// grpc-go retries by itself the methods its service config gives a
// retryPolicy, and those retries ignore the budget and the methods'
// safety. [Client.DialOptions] turns them off (grpc.WithDisableRetry()).
// Interceptors installed by hand ([Client.UnaryInterceptor],
// [Client.StreamInterceptor]) read the service config before the first
// send: when the method has a retryPolicy, or the connection has not
// resolved its config yet, every attempt is sent with
// grpc.MaxRetryRPCBufferSize(0), which makes grpc-go commit it at its
// first message, so that grpc-go never repeats it: a method not safe to
// repeat reaches the server once, another at most the policy's MaxAttempts
// times, from the first call on. The client logs a warning once per method
// that has a retryPolicy ([WithLogger]). Once it found none on a resolved
// connection, it reads the config again on one call of the method in 1024,
// chosen at random, so that a later service config (a resolver's update)
// is noticed without taking the connection's lock on every call.
type Client struct {
	cfg     clientConfig
	methods sync.Map // method -> *methodState
}

// methodState is what a Client keeps about one method, so that an RPC
// reads it with one lock-free lookup.
type methodState struct {
	safe        bool        // listed, or its descriptor says so (see [IsIdempotent])
	exempt      bool        // long-lived: no budget when the caller set none (see [WithExemptMethods])
	checked     atomic.Bool // the service config was read, and had no retryPolicy
	retryPolicy atomic.Bool // it had one: reported, and every attempt committed
}

// recheckEvery is how many calls of a method the client makes, on
// average, between two readings of the service config once it found no
// retryPolicy for that method (see [Client], "grpc-go's own retry").
const recheckEvery = 1024

// method returns the client's state of method, made on its first call.
func (c *Client) method(method string) *methodState {
	if m, ok := c.methods.Load(method); ok {
		return m.(*methodState)
	}
	m := &methodState{safe: c.cfg.idempotent[method] || IsIdempotent(c.cfg.files, method), exempt: c.cfg.exempt[method]}
	actual, _ := c.methods.LoadOrStore(method, m)
	return actual.(*methodState)
}

// NewClient returns a Client configured by opts. It checks the options
// once, here: an invalid policy ([WithPolicy]), WithDefaultBudget(d <= 0), a
// code that is not retryable ([WithRetryCodes]) or a method name that is not
// "/package.Service/Method" ([WithIdempotentMethods]) returns a nil Client
// and a [*deadline.PolicyError] naming the first problem. Nil options are
// ignored.
func NewClient(opts ...ClientOption) (*Client, error) {
	c := newClientConfig(opts)
	if c.err != nil {
		return nil, c.err
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return &Client{cfg: c}, nil
}

// DialOptions returns the options that install the client on a
// connection: its unary and stream interceptors (chained, so that others
// may be added) and grpc.WithDisableRetry(), so that grpc-go's own retry
// does not repeat attempts behind the budget's back. The interceptors it
// installs know grpc-go does not retry, so they never read the service
// config and keep grpc-go's transparent retries (see [Client], "grpc-go's
// own retry").
func (c *Client) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(c.unaryNoGRPCRetry),
		grpc.WithChainStreamInterceptor(c.streamNoGRPCRetry),
		grpc.WithDisableRetry(),
	}
}

// UnaryInterceptor returns the client's unary interceptor; see [Client].
// The reply is filled by the attempt that succeeds. Installed by hand, it
// guards against grpc-go's own retry (see [Client], "grpc-go's own
// retry"); [Client.DialOptions] need not.
func (c *Client) UnaryInterceptor() grpc.UnaryClientInterceptor {
	return c.unaryGuarded
}

func (c *Client) unaryGuarded(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return c.unary(ctx, method, req, reply, cc, invoker, true, opts)
}

func (c *Client) unaryNoGRPCRetry(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return c.unary(ctx, method, req, reply, cc, invoker, false, opts)
}

func (c *Client) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, guard bool, opts []grpc.CallOption) error {
	m := c.method(method)
	if m.exempt && unbounded(ctx) {
		return invoker(ctx, method, req, reply, cc, opts...) // a long-lived method: no budget (see WithExemptMethods)
	}
	d, p, commit := c.prepare(ctx, cc, method, m, true, guard)
	if hedges(p) {
		if r, ok := reply.(proto.Message); ok && r != nil {
			return c.hedgedUnary(ctx, d, p, method, req, r, cc, invoker, commit, opts)
		}
		// Concurrent attempts need a reply each: without a proto
		// message to make them from, the call is not hedged.
		noHedge(&p)
	}
	call := newUnaryCall(opts, commit)
	_, err := deadline.Do(ctx, d, p, func(actx context.Context, a deadline.AttemptInfo) (struct{}, error) {
		if a.Number > 1 {
			call = newUnaryCall(opts, commit)
		}
		err := invoker(actx, method, req, reply, cc, call.opts...)
		return struct{}{}, c.mark(err, call.trailer)
	})
	return wrapError(err)
}

// unaryCall is what a unary RPC hands one of its attempts: the caller's
// call options followed by one that captures the attempt's trailer into
// trailer. It holds the options in inline when they fit, so that the first
// attempt of a call with a few options costs one allocation. A retry gets
// a new one: an invoker that returned early (an interceptor further down
// the chain) cannot then write a stale trailer into the next attempt's.
type unaryCall struct {
	trailer metadata.MD
	opts    []grpc.CallOption
	inline  [unaryInlineOpts]grpc.CallOption
}

// unaryInlineOpts is how many call options (the caller's, the trailer
// capture and the commit) a unaryCall holds without a second allocation.
const unaryInlineOpts = 5

// commitAtFirstSend makes grpc-go commit an attempt's stream as soon as
// its first message is sent (no buffer is kept to replay it), so that
// grpc-go's retry, whatever the service config says, never repeats it. It
// holds no state.
var commitAtFirstSend = grpc.MaxRetryRPCBufferSize(0)

func newUnaryCall(opts []grpc.CallOption, commit bool) *unaryCall {
	u := new(unaryCall)
	all := u.inline[:0]
	if len(opts)+2 > len(u.inline) {
		all = make([]grpc.CallOption, 0, len(opts)+2)
	}
	all = append(all, opts...)
	if commit {
		all = append(all, commitAtFirstSend)
	}
	u.opts = append(all, grpc.Trailer(&u.trailer))
	return u
}

// prepare finds the RPC's deadline and policy; m is the method's state
// ([Client.method]). retry says whether the
// method may be sent more than once at all (a stream that has sent
// messages may not). guard says the interceptor was installed by hand, so
// that grpc-go's own retry may be on: commit then says each attempt must
// be committed at its first message ([commitAtFirstSend]). A method that
// may not be repeated is neither retried nor hedged.
func (c *Client) prepare(ctx context.Context, cc *grpc.ClientConn, method string, m *methodState, retry, guard bool) (d deadline.Deadline, p deadline.Policy, commit bool) {
	d, ok := deadline.FromContext(ctx)
	if !ok {
		d = deadline.New(c.cfg.defaultBudget)
	}
	p = c.policyFor(ctx, method)
	if p.Name == "" {
		p.Name = strings.TrimPrefix(method, "/")
	}
	if p.Limiter == nil {
		p.Limiter = c.cfg.limiter
	}
	if p.Throttle == nil {
		p.Throttle = c.cfg.throttle
	}
	p.Hooks = deadline.Compose(p.Hooks, c.cfg.hooks)
	safe := retry && m.safe
	if !safe && (p.MaxAttempts > 1 || hedges(p)) && c.debug(ctx) {
		c.cfg.logger.DebugContext(ctx, "deadlinegrpc: method is not declared safe to repeat; sending it once", "method", method)
	}
	if guard {
		commit = c.grpcRetries(ctx, cc, method, m)
	}
	if !safe {
		noHedge(&p)
	}
	p.Retryable = classifier(safe, p.Retryable)
	return d, p, commit
}

// hedges reports whether p hedges ([deadline.Policy.Hedge]).
func hedges(p deadline.Policy) bool { return p.Hedge != nil && p.Hedge.MaxHedges > 0 }

// noHedge turns hedging off for a call that is sent without it. An invalid
// policy is left as it is, so that the call still reports it (a
// [*deadline.PolicyError]) whether or not the method could be hedged.
func noHedge(p *deadline.Policy) {
	if p.Hedge != nil && p.Validate() == nil {
		p.Hedge = nil
	}
}

// classifier returns the classifier of an RPC's attempts: custom (nil:
// deadline.IsRetryable) for a method that is safe to repeat, except that a
// pushback refusal is never retried; nothing for any other method. Only a
// custom classifier costs a closure per RPC.
func classifier(safe bool, custom func(error) bool) func(error) bool {
	switch {
	case !safe:
		return neverRetry
	case custom == nil:
		return retryableUnlessRefused
	}
	return func(err error) bool {
		if _, refused := errors.AsType[*PushbackError](err); refused {
			return false
		}
		return custom(err)
	}
}

func neverRetry(error) bool { return false }

func retryableUnlessRefused(err error) bool {
	if _, refused := errors.AsType[*PushbackError](err); refused {
		return false
	}
	return deadline.IsRetryable(err)
}

// policyFor applies the order: context, function, client, default.
func (c *Client) policyFor(ctx context.Context, method string) deadline.Policy {
	if p, ok := RequestPolicy(ctx); ok {
		return p
	}
	if c.cfg.policyFunc != nil {
		if p, ok := c.cfg.policyFunc(method); ok {
			return p
		}
		if c.debug(ctx) {
			c.cfg.logger.DebugContext(ctx, "deadlinegrpc: no policy for method; using the client's policy", "method", method)
		}
	}
	return c.cfg.policy
}

// debug reports whether the logger records debug messages: asked first,
// a disabled debug log costs no allocation (its arguments would escape).
func (c *Client) debug(ctx context.Context) bool {
	return c.cfg.logger.Enabled(ctx, slog.LevelDebug)
}

// mark classifies an attempt's error: one with a status gets its code's
// name as its error.type ([statusError]), and a retryable code without a
// refusal trailer becomes retryable, with the server's pushback applied.
func (c *Client) mark(err error, trailer metadata.MD) error {
	if err == nil {
		return nil
	}
	err = withStatus(err)
	se, ok := err.(*statusError)
	if !ok {
		return err
	}
	code := int(se.st.Code())
	refused := trailer.Get(RefusedTrailer)
	shed := se.st.Code() == codes.ResourceExhausted && shedTrailer(refused)
	if code >= codeCount || !c.cfg.retryCodes[code] || len(refused) > 0 && !shed {
		return err
	}
	err, retry := pushback(err, trailer)
	if !retry {
		return err
	}
	switch c := se.st.Code(); {
	case shed:
		err = deadline.Shed(err) // the server's admission at work: not throttled
	case c == codes.ResourceExhausted || c == codes.Unavailable:
		err = deadline.Overloaded(err) // for the limiter and throttling
	}
	return deadline.Retryable(err)
}

// grpcRetries reports whether grpc-go might repeat an attempt of method
// by its own retry: the service config gives the method a retryPolicy, or
// the connection has not resolved its service config yet (Idle or
// Connecting before the method was ever read), so the answer is not known.
// The first time it finds a retryPolicy it logs a warning for the method.
// Once it found none on a resolved connection, it reads the config again
// on one call in recheckEvery, at random (math/rand/v2's source is per
// thread, so that choice writes nothing shared), so that a later service
// config is noticed without taking the connection's lock on every call.
func (c *Client) grpcRetries(ctx context.Context, cc *grpc.ClientConn, method string, m *methodState) bool {
	if cc == nil {
		return false
	}
	if m.retryPolicy.Load() {
		return true
	}
	if m.checked.Load() && rand.Uint32N(recheckEvery) != 0 {
		return false
	}
	// The service config comes with the resolver's first result, after the
	// connection has left Idle: until a subchannel was tried (Ready or
	// TransientFailure), a method without a retryPolicy may still get one.
	state := cc.GetState()
	resolved := state != connectivity.Idle && state != connectivity.Connecting
	if cc.GetMethodConfig(method).RetryPolicy == nil {
		if resolved {
			m.checked.Store(true)
		}
		return !resolved
	}
	if !m.retryPolicy.Swap(true) {
		what := "retried by this client only"
		if !m.safe {
			what = "sent once: it is not declared safe to repeat"
		}
		c.cfg.logger.WarnContext(ctx, "deadlinegrpc: the service config gives this method a grpc-go retryPolicy, whose retries ignore the budget; the client commits every attempt at its first message, so that grpc-go never repeats it, and the method is "+what+"; dial with Client.DialOptions() or grpc.WithDisableRetry() to keep grpc-go's transparent retries",
			"method", method)
	}
	return true
}
