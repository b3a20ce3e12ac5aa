package mcpbudget

import (
	"context"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
)

// Admission is what a server decided for one request: the shared admission
// rule's result ([admission.Admitter.Admit]: the inbound budget, the
// server's maximum, an outer deadline, the effective budget, which of
// them set it, the floor and the refusal, and with a queue or a learned
// rule what they decided), and what the request's _meta held.
type Admission struct {
	admission.Decision
	// Malformed reports that the request's _meta held the budget key with
	// a value that is not a budget (negative, fractional, not a number),
	// which was ignored: the maximum applied as if the key were absent.
	Malformed bool
}

// Clamped reports whether the inbound budget was larger than the server's
// maximum, which replaced it.
func (a Admission) Clamped() bool {
	return a.Inbound.Present && a.Inbound.Budget > a.MaxBudget
}

// Inbound reads the budget under key from a request's decoded _meta (nil
// for a request without one) by [Parse]'s rules: what the caller sent, and
// whether the value was malformed (then the returned Inbound is absent).
func Inbound(meta map[string]any, key string) (in admission.Inbound, malformed bool) {
	v, present := meta[key]
	switch d, kind := Parse(v, present); kind {
	case Budget, Huge:
		return admission.Inbound{Present: true, Budget: d}, false
	case Malformed:
		return admission.Inbound{}, true
	}
	return admission.Inbound{}, false
}

// Admit decides one inbound request of route ([Route]; "" for one that is
// neither learned nor told apart in the queue) whose decoded _meta is meta:
// its budget under key ([Inbound]) and the deadline ctx already has
// ([deadline.FromContext]: the transport's, an outer middleware's) go to
// g's rule ([admission.Admitter.Admit]). The Ticket is the admitted
// request's: end it with [admission.Ticket.Done] when the handler returns.
func Admit(ctx context.Context, g *admission.Admitter, route string, meta map[string]any, key string) (Admission, admission.Ticket) {
	in, malformed := Inbound(meta, key)
	outer, _ := deadline.FromContext(ctx)
	d, t := g.Admit(ctx, route, in, outer)
	return Admission{Decision: d, Malformed: malformed}, t
}

// Scope returns the context an admitted request's handler runs with: ctx
// carrying a's [deadline.Deadline] ([deadline.NewContext]) and ending at it
// (cause [deadline.ErrDeadlineReached]). When an outer deadline set the
// budget, ctx already ends there and keeps it (no second timer). Call the
// CancelFunc when the handler returns.
func Scope(ctx context.Context, a Admission) (context.Context, context.CancelFunc) {
	ctx = deadline.NewContext(ctx, a.Deadline)
	if a.Limit == admission.ByOuter {
		return ctx, func() {}
	}
	return a.Deadline.Scope(ctx)
}

// ServerBase is the part of a server's configuration every SDK adapter
// shares: its limits and the _meta key it reads. An adapter's options set
// it; its constructor checks it with [ServerBase.Check]. The zero value is
// not ready: start from [NewServerBase].
type ServerBase struct {
	Limits admission.Limits
	Key    string
	err    error
}

// NewServerBase returns the defaults: [admission.DefaultLimits] and
// [MetaKey].
func NewServerBase() ServerBase {
	return ServerBase{Limits: admission.DefaultLimits(), Key: MetaKey}
}

// SetKey sets the _meta key, when it follows MCP's rules ([ValidKey]);
// otherwise it records a [*deadline.PolicyError] naming option, which
// [ServerBase.Check] returns (the first such error wins).
func (b *ServerBase) SetKey(option, key string) {
	if !ValidKey(key) {
		if b.err == nil {
			b.err = &deadline.PolicyError{Field: option, Value: key, Allowed: KeyRule}
		}
		return
	}
	b.Key = key
}

// Check returns the first error an option recorded, else the limits'
// ([admission.Limits.Validate]).
func (b *ServerBase) Check() error {
	if b.err != nil {
		return b.err
	}
	return b.Limits.Validate()
}
