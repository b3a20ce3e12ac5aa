package deadlinehttp

import (
	"context"
	"net/http"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// DefaultMaxBudget is the largest budget [NewHandler] grants a request, and
// the budget of a request that arrives without a usable budget header: 30
// seconds. Change it with [WithMaxBudget].
const DefaultMaxBudget = admission.DefaultMaxBudget

// HandlerOption configures the middleware made by [NewHandler].
type HandlerOption interface{ apply(*handlerConfig) }

type handlerOptionFunc func(*handlerConfig)

func (f handlerOptionFunc) apply(c *handlerConfig) { f(c) }

type handlerConfig struct {
	limits    admission.Limits // WithMaxBudget, WithFloor (Limits.Validate checks them)
	strip     bool
	header    string
	malformed func(r *http.Request, value string)
	admission func(r *http.Request, a Admission)
	bodyRead  bool // WithBodyReadDeadline
	learned   *admission.Learned
	route     func(r *http.Request) string
	queue     *overload.Limiter
	limiter   *overload.Limiter // WithAdmissionLimiter's
	err       error             // the first invalid option, returned by NewHandler
}

func (c *handlerConfig) fail(field string, value any, allowed string) {
	if c.err == nil {
		c.err = &deadline.PolicyError{Field: field, Value: value, Allowed: allowed}
	}
}

// WithMaxBudget sets the server's own maximum (default [DefaultMaxBudget]).
// An inbound budget larger than d is clamped to d: a client can never grant
// the server more time than it allows. A request with no budget header, or
// a malformed one without a valid member, or one stripped by
// [WithStripHeader], gets d. d <= 0 is invalid, and so is a d at or below
// the floor (see [NewHandler]).
//
// It sets [admission.Limits].MaxBudget: the rule and its check are shared
// by every transport.
func WithMaxBudget(d time.Duration) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) { c.limits.MaxBudget = d })
}

// WithFloor sets the server's floor (default 0). A request whose effective
// budget (see [NewHandler]) is at or below d is answered at once with 504
// Gateway Timeout and a [RefusedHeader], and the wrapped handler is not
// called: the work could not finish in time. With the default 0 only a
// budget already spent is refused. d < 0 is invalid, and so is a d at or
// above the maximum, which would refuse every request (see [NewHandler]).
//
// It sets [admission.Limits].Floor: the rule and its check are shared
// by every transport.
func WithFloor(d time.Duration) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) { c.limits.Floor = d })
}

// WithStripHeader makes the middleware a trust edge: the inbound budget
// header is ignored, and the wrapped handler receives a copy of the request
// without it (the inbound request itself is not modified); every request
// gets the maximum budget ([WithMaxBudget]), or less if its context ends
// sooner. Use it where requests come from clients whose budget you do not
// accept.
func WithStripHeader() HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) { c.strip = true })
}

// WithInboundHeader sets the name of the budget header the middleware reads
// (default [DefaultHeader]). A name that is not an HTTP token, the empty
// name included, is invalid (see [NewHandler]).
func WithInboundHeader(name string) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) {
		if !isToken(name) {
			c.fail("deadlinehttp.WithInboundHeader", name, "an HTTP token (letters, digits and !#$%&'*+-.^_`|~)")
			return
		}
		c.header = name
	})
}

// WithMalformed sets a function called, on the request's goroutine and at
// most once per request, when the budget header is present but malformed:
// a member is not 1 to 10 ASCII digits, or the header holds no member at
// all (see [NewHandler]). value is the header's first [MaxMalformedValue]
// bytes, its lines joined with ", ": enough to log or to recognise, never
// the whole of a header a client made huge. Use it to count or log; the
// valid members, if any, still count. A nil f calls nothing.
func WithMalformed(f func(r *http.Request, value string)) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) { c.malformed = f })
}

// WithAdmission sets a function called once per request, on the request's
// goroutine, with what the middleware decided ([Admission]): after the
// header was read (and [WithMalformed] called), and before next runs or the
// refusal is written. r is the request as it arrived: its context does not
// carry the budget yet, and a stripped header is still in its Header. f
// must not modify r. Use it for telemetry: an attribute on the server span,
// a histogram of inbound budgets, a counter of refusals. A nil f calls
// nothing.
//
// WithAdmission adds f to those already set: several all run, in the order
// of the options, so that a telemetry layer that installs its own (package
// otelbudgethttp) keeps the caller's.
func WithAdmission(f func(r *http.Request, a Admission)) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) {
		switch prev := c.admission; {
		case f == nil:
		case prev == nil:
			c.admission = f
		default:
			c.admission = func(r *http.Request, a Admission) { prev(r, a); f(r, a) }
		}
	})
}

// WithBodyReadDeadline makes the middleware set the connection's read
// deadline to the end of the request's budget before next runs, for a
// request that has a body, through [http.ResponseController]: a Read of
// the request's body then fails once the budget is spent, instead of
// blocking for as long as the client stalls. Without it, a handler (or a
// [Transport] forwarding r.Body) can stop waiting at the deadline, but the
// goroutine blocked in the body's Read stays until the client sends more or
// goes away, since net/http's server cannot interrupt that Read otherwise.
//
// The deadline applies to this request only: net/http sets the
// connection's read deadline again once the body is read and before the
// next request, so keep-alive connections are reused as before. It
// replaces, for this request, the read deadline that http.Server's
// ReadTimeout set: with a ReadTimeout shorter than [WithMaxBudget], a body
// may be read for longer than ReadTimeout allows. A ResponseWriter that
// cannot set a read deadline ([http.ErrNotSupported]) leaves the request as
// it was.
func WithBodyReadDeadline() HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) { c.bodyRead = true })
}

// WithLearnedAdmission makes the middleware learn how long each route's
// handler takes and refuse at once a request whose effective budget is
// below what its route very likely needs ([admission.Learned]):
// the response is 504 with [RefusedHeader], "reason=learned", and next is
// not called. Every admitted request's service time is recorded in
// l.Recorder under its route, as completed, or as cut by its budget when
// its context ended first; a canceled request or a panic is not recorded.
// The service time is next's duration without what the client decides:
// time waiting in the queue of [WithAdmissionQueue], time spent in the
// Reads of the request's body and time next's Writes (and Flush,
// ReadFrom) block on a client reading slowly are excluded, so that slow
// uploads and slow readers do not teach the route that its work is slow
// and make it refuse the requests of other clients. (Next reading its body
// or writing on another goroutine while it works has that overlap taken
// out too: its service time is then recorded as shorter than it was.) To
// time the writes, next gets a ResponseWriter of the middleware's that
// keeps http.Flusher, http.Hijacker, io.ReaderFrom and, through Unwrap,
// http.ResponseController; with the first two it always offers them,
// passing them on to the original (Hijack returns the original's
// http.ErrNotSupported when it has none).
//
// The route is r.Pattern as the request reaches the middleware, which is
// set when the middleware is registered on a [http.ServeMux] pattern
// (mux.Handle("GET /items/{id}", h)); to wrap a whole mux, name the route
// with [WithRoute]. A request whose route is empty is neither checked nor
// recorded. Until a route has enough samples (l.MinSamples, and the
// estimator's own minimum) its requests are admitted exactly as without
// this option. An invalid l (see [admission.Learned]) makes
// NewHandler return its [*deadline.PolicyError].
func WithLearnedAdmission(l admission.Learned) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) { c.learned = &l })
}

// WithRoute sets how the admission options ([WithLearnedAdmission],
// [WithAdmissionLimiter], [WithAdmissionQueue]) name a request's route,
// which keeps each route's service time and latency apart, as deadlinegrpc
// names the method: f is called once per request, on its goroutine, before
// next runs (default: r.Pattern, set when the middleware is registered on
// a [http.ServeMux] pattern). It must return one of a small set of names (patterns, not
// paths: the recorder keeps a bounded number of routes), "" for a request
// not to learn from, e.g. for a wrapped mux:
//
//	deadlinehttp.WithRoute(func(r *http.Request) string { _, p := mux.Handler(r); return p })
//
// A nil f keeps the default.
func WithRoute(f func(r *http.Request) string) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) {
		if f != nil {
			c.route = f
		}
	})
}

// WithAdmissionQueue bounds how many requests next runs at once (limit) and
// how many may wait for a slot (backlog), with the queue of [admission.NewQueue]:
// adaptive LIFO, its doc says why. A request that finds every slot taken
// waits; it is answered 504 with [RefusedHeader], "reason=queue_timeout",
// without next running, as soon as what is left of its budget could no
// longer cover what its route needs (the learned service time of
// [WithLearnedAdmission], else the floor), and left without an answer worth
// reading when its request ends (the client gone). A request that finds
// the backlog full is answered 503 Service Unavailable, without
// [RefusedHeader]: overload, not a budget too small. One that waited in a
// standing queue as long as [admission.NewQueue] lets it (twice its need), or
// that a newer request displaced from a full backlog, is shed: 503 with
// [RefusedHeader] "reason=standing_queue", which the [Transport] retries
// without charging the retry budget ([WithOverloadCharge]) and which
// client-side throttling does not count ([deadline.Shed]). limit <= 0 or
// backlog < 0 makes NewHandler return a [*deadline.PolicyError].
func WithAdmissionQueue(limit, backlog int) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) {
		q, err := admission.NewQueue(limit, backlog)
		switch {
		case limit <= 0:
			c.fail("deadlinehttp.WithAdmissionQueue limit", limit, "> 0 requests at once")
		case err != nil:
			c.fail("deadlinehttp.WithAdmissionQueue backlog", backlog, ">= 0 waiting requests (0: none wait)")
		default:
			c.queue = q
		}
	})
}

// WithAdmissionLimiter bounds how many requests next runs at once with an
// adaptive limit in place of [WithAdmissionQueue]'s fixed one: a
// [overload.Limiter], whose limit follows the handlers' latency against its
// baseline per route, with the same waiting rule and answers (504 with
// [RefusedHeader] "reason=queue_timeout" when a waiting request can no
// longer finish, 503 when the backlog is full or its breaker open). Its
// latency is learned per route ([WithRoute]; r.Pattern by default), less
// the time blocked on the client, as [WithLearnedAdmission] records it:
// slow uploads and slow readers do not lower the limit. Several
// handlers may share one. l must be built with [overload.WithArrivalOrder]:
// the budget header is the client's claim and must not buy its place in
// the queue. Setting both, or l in deadline order, makes NewHandler return
// a [*deadline.PolicyError]; a nil l adds nothing.
func WithAdmissionLimiter(l *overload.Limiter) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) { c.limiter = l })
}

// NewHandler returns middleware that gives every request a budget and runs
// next under it.
//
// On arrival it reads the budget header ([DefaultHeader],
// [WithInboundHeader]) as an RFC 9110 list: every line, split at commas,
// each member 1 to 10 ASCII digits of milliseconds (see [ParseBudget]),
// spaces and tabs around members and empty members ignored. The smallest
// valid member counts, so a proxy that adds a line or joins lines can lower
// the budget but never raise it. An explicit 0 is a budget already spent.
// Invalid members, or a header with no member, are reported to
// [WithMalformed] (a bounded prefix of the value) and ignored.
// [WithStripHeader] ignores the header altogether.
//
// The effective budget is the smallest of three limits: the header's
// budget (when one is valid), the server's maximum ([WithMaxBudget],
// always), and the time left on a deadline the request's context already
// has (its own, or a [deadline.Deadline] stored in it: an outer layer's
// limit). [WithAdmission] observes the result ([Admission]).
//
// A request whose effective budget is at or below the floor ([WithFloor];
// zero when nothing is left, whatever the floor) is refused: the response is
// 504 Gateway Timeout with [RefusedHeader] and a one-line text body that
// repeats the header ("deadline budget too small: budget-ms=5,
// floor-ms=20"), and next is not called. So is, with [WithLearnedAdmission],
// a request whose budget is below what its route very likely needs, and,
// with [WithAdmissionQueue], one that waited for a slot until it no longer
// could finish; their header adds the reason ("budget-ms=5, floor-ms=0,
// reason=learned", "reason=queue_timeout") but nothing of what was learned.
// Nothing else about the server's configuration appears in any response.
//
// Otherwise next runs with a shallow copy of the request whose context
// carries a [deadline.Deadline] of the effective budget, starting on
// arrival (or the outer deadline itself when that one set the budget), and
// ends at it ([deadline.Deadline.Scope]), so that [deadline.FromContext],
// ctx.Done() and a [Transport] used inside the handler all spend the same
// budget. The middleware writes nothing after next returns, and it does not
// recover a panic in next or in a [WithAdmission] function: it releases the
// scope and the request's slot in the queue ([WithAdmissionQueue]), and
// lets the panic go on.
//
// # When the lease ends
//
// The caller granted this request its own attempt's lease: when the
// context is done with [context.DeadlineExceeded] (context.Cause
// [deadline.ErrDeadlineReached] when this middleware's deadline ended it),
// the caller has stopped waiting. next should stop its work and return
// promptly, and never answer as if it had succeeded with a partial result.
// If it has written nothing yet it may answer 504 Gateway Timeout, or
// panic with [http.ErrAbortHandler] to drop the connection without an
// answer (net/http logs nothing; nobody reads the answer either way).
// Whatever it writes after the deadline is likely discarded by the client.
//
// # Errors
//
// NewHandler checks its arguments once, here, never per request: a nil
// next, WithMaxBudget(d <= 0), WithFloor(d < 0), a floor at or above the
// maximum (every request would be refused), a header name that is not an
// HTTP token, an invalid [WithLearnedAdmission] or [WithAdmissionQueue]. It
// then returns a nil handler and a [*deadline.PolicyError]
// naming the first problem (errors.Is(err, [deadline.ErrInvalidPolicy])).
// Nil options are ignored.
func NewHandler(next http.Handler, opts ...HandlerOption) (http.Handler, error) {
	c := handlerConfig{limits: admission.DefaultLimits(), header: DefaultHeader}
	if next == nil {
		c.fail("deadlinehttp.NewHandler next", "<nil>", "a non-nil http.Handler")
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	lim := c.limiter
	if c.queue != nil {
		if lim != nil {
			return nil, &deadline.PolicyError{Field: "deadlinehttp.WithAdmissionLimiter", Value: "set with WithAdmissionQueue",
				Allowed: "WithAdmissionQueue or WithAdmissionLimiter, not both"}
		}
		lim = c.queue
	}
	adm, err := admission.NewAdmitter(admission.Config{Limits: c.limits, Learned: c.learned, Limiter: lim})
	if err != nil {
		return nil, err
	}
	c.header = http.CanonicalHeaderKey(c.header) // looked up in the header map directly
	return &handler{next: next, cfg: c, adm: adm}, nil
}

type handler struct {
	next http.Handler
	cfg  handlerConfig
	adm  *admission.Admitter
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, d, t := h.admit(r)
	// From here the request may hold a slot of the admission queue: its
	// Ticket ends on every path, a panic in a WithAdmission function or in
	// next included, or the slot is lost for good.
	ctx, cancel := r.Context(), noCancel
	returned := false
	var cio *clientIO
	unshield := noCancel
	defer func() {
		if cio != nil {
			t.Exclude(cio.wait())
		}
		t.Done(ctx, returned) // before cancel: ctx says how next ended
		cancel()
		unshield()
	}()
	if h.cfg.admission != nil {
		h.cfg.admission(r, a)
	}
	if a.Refused() {
		refuse(w, a)
		return
	}
	parent := r.Context()
	if h.cfg.bodyRead && r.Body != nil && r.Body != http.NoBody {
		// ErrNotSupported (a ResponseWriter without the method) leaves the
		// request as it was, as WithBodyReadDeadline says.
		if http.NewResponseController(w).SetReadDeadline(d.End()) == nil {
			parent, unshield = shieldAfter(parent, d.End())
		}
	}
	ctx, cancel = d.Scope(deadline.NewContext(parent, d))
	inner := r.WithContext(ctx)
	if a.HeaderStripped {
		inner.Header = r.Header.Clone() // the inbound request is not ours to modify
		inner.Header.Del(h.cfg.header)
	}
	if h.cfg.learned != nil || h.cfg.limiter != nil {
		// The client decides how fast its body arrives and how fast it
		// reads the answer: that time is not the route's service time
		// (see WithLearnedAdmission, WithAdmissionLimiter).
		cio = &clientIO{}
		cio.w = clientWriter{ResponseWriter: w, c: cio}
		w = &cio.w
		if r.Body != nil && r.Body != http.NoBody {
			cio.body = clientBody{ReadCloser: r.Body, c: cio}
			inner.Body = &cio.body
		}
	}
	h.next.ServeHTTP(w, inner)
	returned = true
}

func noCancel() {}

// shieldAfter returns parent's values and cancellation, except a
// cancellation seen at or after end: net/http cancels a request's context
// when a read of its connection fails, and a read deadline set at end
// (WithBodyReadDeadline) fails one at end. That cancellation is the budget
// running out, which the scope's own deadline (end) reports as such
// (context.DeadlineExceeded); passed on, it would race that deadline and
// could make the budget's end look like the caller's cancel. A
// cancellation before end (the client went away) is passed on with its
// cause. The returned func releases it.
func shieldAfter(parent context.Context, end time.Time) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stop := context.AfterFunc(parent, func() {
		if time.Now().Before(end) {
			cancel(context.Cause(parent))
		}
	})
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// refuse answers a refused request: 504 with RefusedHeader when its budget
// was too small, 503 when the admission queue was full, with RefusedHeader
// "reason=standing_queue" when the request waited and was shed from a
// standing queue.
func refuse(w http.ResponseWriter, a Admission) {
	refused := "budget-ms=" + refusedMs(a.Budget) + ", floor-ms=" + refusedMs(a.Floor)
	if !a.Refusal.Budget() {
		if a.Refusal == RefusalQueueFull && a.Queued {
			w.Header().Set(RefusedHeader, refused+", reason="+reasonStandingQueue)
		}
		http.Error(w, "server busy: too many requests waiting", http.StatusServiceUnavailable)
		return
	}
	if a.Refusal != RefusalSpent && a.Refusal != RefusalFloor {
		refused += ", reason=" + a.Refusal.String()
	}
	w.Header().Set(RefusedHeader, refused)
	http.Error(w, "deadline budget too small: "+refused, http.StatusGatewayTimeout)
}

// admit reads the request's budget header and context, and applies the
// server's admission ([admission.Admitter]: the shared rule, then what was
// learned and the queue); d is the deadline next runs under when admitted,
// t its hold on the admission, to end when next returns.
func (h *handler) admit(r *http.Request) (a Admission, d deadline.Deadline, t admission.Ticket) {
	var in admission.Inbound
	lines := r.Header[h.cfg.header]
	a.HeaderPresent = len(lines) > 0
	switch {
	case h.cfg.strip:
		a.HeaderStripped = a.HeaderPresent
	case a.HeaderPresent:
		l := parseBudgetList(lines)
		a.HeaderValid, a.HeaderBudget, a.HeaderMalformed = l.valid, l.min, l.malformed
		if l.malformed && h.cfg.malformed != nil {
			h.cfg.malformed(r, malformedPrefix(lines))
		}
		in = admission.Inbound{Present: l.valid, Budget: l.min}
	}
	outer, _ := deadline.FromContext(r.Context())
	// Every admission option keeps routes apart, as deadlinegrpc names the
	// method: an adaptive limit over a 2 ms and a 100 ms route with one
	// baseline fell from 48 to 4.
	route := r.Pattern
	if h.cfg.route != nil {
		route = h.cfg.route(r)
	}
	ad, t := h.adm.Admit(r.Context(), route, in, outer)
	a.MaxBudget, a.Floor, a.Budget = ad.MaxBudget, ad.Floor, ad.Budget
	a.HasContextDeadline, a.ContextRemaining = ad.HasOuter, ad.OuterRemaining
	a.Limit, a.Refusal = ad.Limit, ad.Refusal
	a.Learned, a.Estimate, a.Probe, a.Queued, a.QueueWait = ad.Learned, ad.Estimate, ad.Probe, ad.Queued, ad.QueueWait
	return a, ad.Deadline, t
}

func refusedMs(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	return FormatBudget(d)
}
