package deadlinegrpc

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// DefaultMaxBudget is the largest budget a [Server] grants an RPC, and the
// budget of an RPC that arrives without a deadline: 30 seconds. Change it
// with [WithMaxBudget].
const DefaultMaxBudget = admission.DefaultMaxBudget

// RefusedTrailer is the trailer a [Server] sets on the DEADLINE_EXCEEDED
// status it answers when an RPC's effective budget is at or below its
// floor, or spent: "budget-ms=5, floor-ms=20", the same value as
// deadlinehttp's Deadline-Refused header (whole milliseconds rounded up, 0
// when nothing was left). A [Client] never retries a status that carries
// it: the next attempt would arrive with even less.
//
// On RESOURCE_EXHAUSTED it says the RPC was shed from a standing admission
// queue after it waited there as long as such a queue lets an RPC wait:
// "budget-ms=300, floor-ms=0, reason=standing_queue", the server's
// admission choosing whom to serve ("shed now, come back"). A [Client]
// retries that one as any RESOURCE_EXHAUSTED, marked [deadline.Shed]:
// client-side throttling does not count it.
const RefusedTrailer = "deadline-refused"

// ServerOption configures [NewServer].
type ServerOption interface{ applyServer(*serverConfig) }

type serverOptionFunc func(*serverConfig)

func (f serverOptionFunc) applyServer(c *serverConfig) { f(c) }

type serverConfig struct {
	limits    admission.Limits // WithMaxBudget, WithFloor (Limits.Validate checks them)
	admission []func(ctx context.Context, method string, a Admission)
	learned   *admission.Learned // WithLearnedAdmission
	queue     *overload.Limiter  // WithAdmissionQueue
	limiter   *overload.Limiter  // WithAdmissionLimiter
	exempt    exemptSet
	err       error
}

func (c *serverConfig) fail(field string, value any, allowed string) {
	if c.err == nil {
		c.err = &deadline.PolicyError{Field: field, Value: value, Allowed: allowed}
	}
}

// WithMaxBudget sets the server's own maximum (default
// [DefaultMaxBudget]). An inbound deadline further away than d is clamped
// to d: a client can never grant the server more time than it allows. An
// RPC without a deadline gets d. d <= 0 is invalid, and so is a d at or
// below the floor (see [NewServer]).
//
// It sets [admission.Limits].MaxBudget: the rule and its check are shared
// by every transport.
func WithMaxBudget(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.limits.MaxBudget = d })
}

// WithFloor sets the server's floor (default 0). An RPC whose effective
// budget is at or below d is answered at once with DEADLINE_EXCEEDED and
// [RefusedTrailer], and the handler is not called. With the default 0 only
// a budget already spent is refused. d < 0 is invalid, and so is a d at or
// above the maximum (see [NewServer]).
//
// It sets [admission.Limits].Floor: the rule and its check are shared
// by every transport.
func WithFloor(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.limits.Floor = d })
}

// WithAdmission adds a function called once per RPC, on its goroutine,
// with what the server decided ([Admission]) before the handler runs or the
// refusal is returned. ctx is the RPC's context as it arrived (otelgrpc's
// server span is in it); method is the full method name. Use it for
// telemetry. Calls add functions, called in order; a nil f adds nothing.
func WithAdmission(f func(ctx context.Context, method string, a Admission)) ServerOption {
	return serverOptionFunc(func(c *serverConfig) {
		if f != nil {
			c.admission = append(c.admission, f)
		}
	})
}

// Server holds the server interceptors that give every RPC a budget; create
// one with [NewServer]. It is safe for concurrent use.
type Server struct {
	cfg serverConfig
	// unary admits unary RPCs (learned service time and queue, when set);
	// streams admits streams (never: see WithLearnedAdmission).
	unary, streams *admission.Admitter
}

// NewServer returns a Server configured by opts.
//
// On arrival an RPC's budget is the time left on its context's deadline
// (grpc-go sets it from the inbound grpc-timeout; a value too large for a
// time.Duration is already saturated there), clamped to the server's
// maximum ([WithMaxBudget]); an RPC without a deadline gets the maximum.
// [WithAdmission] observes the result ([Admission]).
//
// An RPC whose budget is at or below the floor ([WithFloor]; zero when
// nothing is left, whatever the floor) is refused: the interceptor returns
// DEADLINE_EXCEEDED with the message "deadline budget too small:
// budget-ms=5, floor-ms=20" and [RefusedTrailer], and the handler is not
// called.
//
// An RPC of an exempt method ([WithExemptMethods]; the standard long-lived
// streams, such as the health Watch, by default) that arrives without a
// deadline is not admitted at all: its handler runs as without the
// interceptors.
//
// Otherwise the handler runs with a context that carries a
// [deadline.Deadline] of that budget and ends at it, so that
// [deadline.FromContext], ctx.Done() and every [Client] or deadlinehttp
// transport used inside the handler spend the same budget. When the inbound
// deadline set the budget, that context is the RPC's own (grpc-go's, which
// already ends there; its cause is context.DeadlineExceeded) with the
// Deadline added: no second timer. When the maximum did, it is a context of
// its own ending at the maximum, with cause [deadline.ErrDeadlineReached].
//
// NewServer checks its options once, here: WithMaxBudget(d <= 0),
// WithFloor(d < 0), a floor at or above the maximum and an invalid
// [WithLearnedAdmission] or [WithAdmissionQueue] return a nil Server and a
// [*deadline.PolicyError] naming the first problem. Nil options are
// ignored.
func NewServer(opts ...ServerOption) (*Server, error) {
	c := serverConfig{limits: admission.DefaultLimits(), exempt: newExemptSet()}
	for _, o := range opts {
		if o != nil {
			o.applyServer(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	lim := c.limiter
	if c.queue != nil {
		if lim != nil {
			return nil, &deadline.PolicyError{Field: "deadlinegrpc.WithAdmissionLimiter", Value: "set with WithAdmissionQueue",
				Allowed: "WithAdmissionQueue or WithAdmissionLimiter, not both"}
		}
		lim = c.queue
	}
	unary, err := admission.NewAdmitter(admission.Config{Limits: c.limits, Learned: c.learned, Limiter: lim})
	if err != nil {
		return nil, err
	}
	streams, err := admission.NewAdmitter(admission.Config{Limits: c.limits})
	if err != nil {
		return nil, err
	}
	return &Server{cfg: c, unary: unary, streams: streams}, nil
}

// ServerOptions returns the options that install the server's unary and
// stream interceptors (chained, so that others may be added).
func (s *Server) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(s.StreamInterceptor()),
	}
}

// UnaryInterceptor returns the server's unary interceptor; see [NewServer].
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if s.cfg.exempt.applies(ctx, info.FullMethod) {
			return handler(ctx, req)
		}
		a, d, t := s.admit(ctx, info.FullMethod, s.unary)
		// From here the RPC may hold a slot of the admission queue: its
		// Ticket ends on every path, a panic in a WithAdmission function
		// or in the handler included (a recovery interceptor outside keeps
		// the server up, and the slot must come back).
		hctx, cancel := ctx, noCancel
		returned := false
		defer func() {
			t.Done(hctx, returned) // before cancel: hctx says how the handler ended
			cancel()
		}()
		s.observe(ctx, info.FullMethod, a)
		if a.Refused() {
			if a.Refusal.Budget() || shed(a) {
				_ = grpc.SetTrailer(ctx, refusedTrailer(a))
			}
			return nil, refusedStatus(a)
		}
		hctx, cancel = scope(ctx, a, d)
		resp, err := handler(hctx, req)
		returned = true
		return resp, err
	}
}

// StreamInterceptor returns the server's stream interceptor; see
// [NewServer].
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if s.cfg.exempt.applies(ss.Context(), info.FullMethod) {
			return handler(srv, ss) // a long-lived stream: no maximum (see WithExemptMethods)
		}
		a, d, _ := s.admit(ss.Context(), info.FullMethod, s.streams) // no queue: nothing to end
		s.observe(ss.Context(), info.FullMethod, a)
		if a.Refused() {
			ss.SetTrailer(refusedTrailer(a))
			return refusedStatus(a)
		}
		ctx, cancel := scope(ss.Context(), a, d)
		defer cancel()
		return handler(srv, &serverStream{ServerStream: ss, ctx: ctx})
	}
}

// scope returns the handler's context: ctx carrying d and ending at it.
// When the inbound deadline set the budget, ctx already ends at d (grpc-go
// made it from grpc-timeout, and d is that instant), so a second timer
// context would only duplicate it: ctx is used as it is.
func scope(ctx context.Context, a Admission, d deadline.Deadline) (context.Context, context.CancelFunc) {
	ctx = deadline.NewContext(ctx, d)
	if a.Limit == LimitInbound {
		return ctx, noCancel
	}
	return d.Scope(ctx)
}

func noCancel() {}

type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }

// admit decides an RPC's budget with g; t is its hold on the admission,
// to end when the handler returns or panics.
func (s *Server) admit(ctx context.Context, method string, g *admission.Admitter) (Admission, deadline.Deadline, admission.Ticket) {
	var in admission.Inbound
	if end, ok := ctx.Deadline(); ok {
		in = admission.Inbound{Present: true, End: end}
	}
	ad, t := g.Admit(ctx, method, in, deadline.Deadline{})
	a := Admission{
		HasDeadline: ad.Inbound.Present, Inbound: ad.Inbound.Budget,
		MaxBudget: ad.MaxBudget, Budget: ad.Budget, Limit: ad.Limit, Floor: ad.Floor, Refusal: ad.Refusal,
		Learned: ad.Learned, Estimate: ad.Estimate, Probe: ad.Probe, Queued: ad.Queued, QueueWait: ad.QueueWait,
	}
	return a, ad.Deadline, t
}

// observe calls the WithAdmission functions.
func (s *Server) observe(ctx context.Context, method string, a Admission) {
	for _, f := range s.cfg.admission {
		f(ctx, method, a)
	}
}

func refusedValue(a Admission) string {
	v := "budget-ms=" + formatMs(a.Budget) + ", floor-ms=" + formatMs(a.Floor)
	switch {
	case shed(a):
		v += ", reason=" + reasonStandingQueue
	case a.Refusal != RefusalSpent && a.Refusal != RefusalFloor:
		v += ", reason=" + a.Refusal.String()
	}
	return v
}

// reasonStandingQueue is RefusedTrailer's reason on a RESOURCE_EXHAUSTED
// that shed an RPC from a standing queue.
const reasonStandingQueue = "standing_queue"

// shed reports whether a is a refusal of an RPC that waited in the
// admission queue and was shed from it as overload (a standing queue's
// bound, or displaced from a full backlog by a newer RPC).
func shed(a Admission) bool { return a.Refusal == RefusalQueueFull && a.Queued }

// shedTrailer reports whether a RefusedTrailer's values name
// reasonStandingQueue: one value, with a member reason=standing_queue.
func shedTrailer(vs []string) bool {
	if len(vs) != 1 {
		return false
	}
	for m := range strings.SplitSeq(vs[0], ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(m), "="); ok && k == "reason" && v == reasonStandingQueue {
			return true
		}
	}
	return false
}

func refusedTrailer(a Admission) metadata.MD {
	return metadata.Pairs(RefusedTrailer, refusedValue(a))
}

func refusedStatus(a Admission) error {
	if !a.Refusal.Budget() {
		return status.Error(codes.ResourceExhausted, "server busy: too many RPCs waiting")
	}
	return status.Error(codes.DeadlineExceeded, "deadline budget too small: "+refusedValue(a))
}
