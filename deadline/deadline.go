package deadline

import (
	"context"
	"time"
)

// Deadline is one instant on the monotonic clock shared by every step of a
// run, together with the budget it was created with.
//
// A Deadline is an immutable value: it is never extended, and copies are safe
// for concurrent use. The zero Deadline has no end: it reports itself
// [Deadline.Expired], and [Do] rejects it with an error.
type Deadline struct {
	end    time.Time // carries a monotonic reading when made by New
	budget time.Duration
}

// New returns a Deadline that ends budget from now. It reads the monotonic
// clock once. A budget <= 0 gives a Deadline that is already expired.
func New(budget time.Duration) Deadline {
	return Deadline{end: time.Now().Add(budget), budget: budget}
}

// At returns a Deadline that ends at t. Its budget is the time from now until
// t. A t without a monotonic reading (one parsed or built with time.Date) is
// compared on the wall clock; prefer [New] within one process.
func At(t time.Time) Deadline {
	return Deadline{end: t, budget: time.Until(t)}
}

// IsZero reports whether d is the zero Deadline, which has no end.
func (d Deadline) IsZero() bool { return d.end.IsZero() }

// End returns the instant at which d ends.
func (d Deadline) End() time.Time { return d.end }

// Budget returns the duration d was created with: the argument to [New], or
// the time that was left when [At] or [FromContext] adopted an instant.
func (d Deadline) Budget() time.Duration { return d.budget }

// Remaining returns the time left until d ends. It is negative after the
// deadline and for the zero Deadline.
func (d Deadline) Remaining() time.Duration {
	if d.end.IsZero() {
		return -1
	}
	return time.Until(d.end)
}

// Expired reports whether Remaining() <= 0.
func (d Deadline) Expired() bool { return d.Remaining() <= 0 }

// Scope returns a new context derived from parent that ends at d, and the
// function that releases it. Every call builds a new context. When d ends the
// context's Err is context.DeadlineExceeded and context.Cause reports
// [ErrDeadlineReached]. The caller must call cancel when done.
func (d Deadline) Scope(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadlineCause(parent, d.end, ErrDeadlineReached)
}

// ScopeLimit is like [Deadline.Scope] but ends at whichever comes first: d, or
// limit from now. context.Cause tells which one ended it: [ErrCeilingReached]
// for the limit, [ErrDeadlineReached] for d. A limit <= 0 gives a context
// that is already done with context.DeadlineExceeded.
func (d Deadline) ScopeLimit(parent context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	now := time.Now()
	if limit <= 0 {
		return context.WithDeadlineCause(parent, now, ErrCeilingReached)
	}
	if lim := now.Add(limit); lim.Before(d.end) {
		return context.WithDeadlineCause(parent, lim, ErrCeilingReached)
	}
	return context.WithDeadlineCause(parent, d.end, ErrDeadlineReached)
}

// String describes d as its budget and what is left, e.g.
// "deadline(budget 1s, 870ms left)".
func (d Deadline) String() string {
	if d.IsZero() {
		return "deadline(none)"
	}
	return "deadline(budget " + d.budget.String() + ", " + d.Remaining().Round(time.Microsecond).String() + " left)"
}

type deadlineKey struct{}

// NewContext returns a copy of ctx that carries d, where [FromContext] (and
// the HTTP transport and middleware) find it. It does not set a context
// deadline: use [Deadline.Scope] for that.
func NewContext(ctx context.Context, d Deadline) context.Context {
	return context.WithValue(ctx, deadlineKey{}, d)
}

// FromContext returns the run's Deadline found in ctx: the one stored by
// [NewContext], or a Deadline adopted from ctx's own deadline (its budget is
// the time left now), whichever ends first. It reports false when ctx has
// neither. A stored zero Deadline has no end and counts as none.
func FromContext(ctx context.Context) (Deadline, bool) {
	d, stored := ctx.Value(deadlineKey{}).(Deadline)
	stored = stored && !d.IsZero()
	t, has := ctx.Deadline()
	switch {
	case has && (!stored || t.Before(d.end)):
		return At(t), true
	case stored:
		return d, true
	}
	return Deadline{}, false
}
