package budgetprop

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// Propagator is a propagation.TextMapPropagator that carries the remaining
// budget of the context's [deadline.Deadline] across any carrier the
// OpenTelemetry instrumentations inject into and extract from: HTTP
// headers (otelhttp), gRPC metadata (otelgrpc), message headers. Compose
// it with the others in the global propagator:
//
//	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
//		propagation.TraceContext{}, propagation.Baggage{}, p))
//
// Inject writes [FieldBudget] (relative) and [FieldExpiry] (wall clock).
// Extract reads them as a direct hop, applies the receiver's admission rule
// ([admission.Admit]: clamp to the maximum, refuse at or below the floor)
// and stores the result in the context: a [deadline.Deadline]
// ([deadline.NewContext]) and the [Extraction] ([FromContext]). Because the
// stored Deadline is measured on the receiver's own monotonic clock, a
// service in the middle that has only otelhttp or otelgrpc and this
// propagator forwards what is really left: its instrumentation's Inject,
// on its outgoing calls, computes the remaining budget afresh.
//
// A Propagator is immutable and safe for concurrent use. Build it with
// [New]; the zero Propagator is not valid.
type Propagator struct {
	c config
}

var _ propagation.TextMapPropagator = (*Propagator)(nil)

// New returns a Propagator configured by opts. An invalid option (a
// maximum <= 0, a negative floor or allowance, a floor at or above the
// maximum) returns nil and a *deadline.PolicyError naming it
// (errors.Is(err, deadline.ErrInvalidPolicy)).
func New(opts ...Option) (*Propagator, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Propagator{c: c}, nil
}

// Fields returns the keys Inject sets: [FieldBudget] and [FieldExpiry].
func (p *Propagator) Fields() []string { return []string{FieldBudget, FieldExpiry} }

// Inject writes the remaining budget of the Deadline [deadline.FromContext]
// finds in ctx (one stored with deadline.NewContext, or ctx's own
// deadline, whichever ends first) into carrier: [FieldBudget], rounded up
// to the millisecond and at least 1 (a spent budget is sent as 1, never 0,
// which some peers read as "no limit"), and [FieldExpiry], the wall clock
// now plus that budget. A ctx without a deadline injects nothing, so that
// no hop invents a budget its caller did not have.
func (p *Propagator) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	d, ok := deadline.FromContext(ctx)
	if !ok {
		return
	}
	rem := d.Remaining()
	now := p.nowMs()
	exp := now + budgetMs(rem)
	if rem <= 0 {
		exp = now + max(int64(rem/time.Millisecond), -now)
	}
	carrier.Set(FieldBudget, deadlinehttp.FormatBudget(rem))
	carrier.Set(FieldExpiry, formatExpiry(exp))
}

// Extract reads the budget fields of carrier as a direct hop: the sender
// injected them as it sent. The inbound budget is [FieldBudget], exact and
// measured on this process's monotonic clock on arrival (as
// deadlinehttp.NewHandler reads the same header), lowered to what
// [FieldExpiry] leaves plus the skew allowance when that is less: a
// relative value that went stale on the way (a proxy that held the
// request, a replay) is charged, a clock disagreement within the allowance
// is not. A carrier with only the expiry gives the expiry's remaining.
//
// The inbound budget then goes through [admission.Admit] with the
// receiver's maximum and floor, and with a deadline ctx already has as the
// outer limit. Extract returns ctx with the [Extraction] ([FromContext])
// and the admitted [deadline.Deadline] (deadline.NewContext), refused or
// not: Extract cannot fail, so the receiver asks [Check] or
// [Extraction.Refused] and answers the refusal in its own protocol. A
// refused budget stored in the context is already spent or at most the
// floor, so what a pass-through service forwards is refused downstream
// too.
//
// A carrier with no budget field returns ctx unchanged: the propagator
// never invents a budget (it runs in pass-through services, where a
// maximum of their own would be imposed on everything downstream). A
// carrier whose fields hold no valid value (malformed) stores an
// Extraction with Malformed set and no Deadline: the fields are ignored.
func (p *Propagator) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	x := p.read(carrier)
	if !x.HasSentBudget && !x.HasExpiry {
		if x.Malformed {
			ctx = context.WithValue(ctx, extractionKey{}, x)
		}
		return ctx
	}
	in := x.SentBudget
	if x.HasExpiry {
		e := x.expiryRemaining
		switch {
		case !x.HasSentBudget:
			in = e
		case e+p.c.skew < in:
			in = e + p.c.skew
		}
	}
	return p.admit(ctx, x, admission.Inbound{Present: true, Budget: in})
}

// admit applies admission.Admit to the inbound budget in, with the
// deadline ctx already has as the outer limit, and stores the Extraction
// and the admitted Deadline in ctx.
func (p *Propagator) admit(ctx context.Context, x Extraction, in admission.Inbound) context.Context {
	outer, _ := deadline.FromContext(ctx)
	x.Admission = admission.Admit(in, outer, p.c.limits)
	ctx = context.WithValue(ctx, extractionKey{}, x)
	return deadline.NewContext(ctx, x.Admission.Deadline)
}

// read parses both fields of carrier, reading every value of a carrier
// that has several per key (propagation.ValuesGetter, as HTTP headers).
func (p *Propagator) read(carrier propagation.TextMapCarrier) Extraction {
	b := parseField(values(carrier, FieldBudget), maxBudgetDigits)
	e := parseField(values(carrier, FieldExpiry), maxExpiryDigits)
	x := Extraction{Malformed: b.malformed || e.malformed}
	if b.valid {
		x.HasSentBudget, x.SentBudget = true, time.Duration(b.ms)*time.Millisecond
	}
	if e.valid {
		x.HasExpiry, x.Expiry = true, time.UnixMilli(e.ms)
		x.expiryRemaining = untilMs(e.ms, p.nowMs())
	}
	return x
}

func values(carrier propagation.TextMapCarrier, key string) []string {
	if vg, ok := carrier.(propagation.ValuesGetter); ok {
		return vg.Values(key)
	}
	if v := carrier.Get(key); v != "" {
		return []string{v}
	}
	return nil
}

// nowMs is the wall clock in unix milliseconds, bounded to what the
// expiry field can hold.
func (p *Propagator) nowMs() int64 {
	return min(max(p.c.clock().UnixMilli(), 0), maxExpiryMs)
}
