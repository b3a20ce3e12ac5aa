package budgetprop

import (
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// DefaultSkewAllowance is the clock disagreement between two hosts that a
// [Propagator] takes as normal unless told otherwise ([WithSkewAllowance]):
// comfortably above the ±200 ms that hosts kept by NTP stay within even
// across regions (on one network they agree to a few milliseconds).
const DefaultSkewAllowance = 250 * time.Millisecond

// Option configures [New].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	limits admission.Limits // WithMaxBudget, WithFloor (Limits.Validate checks them)
	skew   time.Duration
	clock  func() time.Time
	err    error // the first invalid option, returned by New
}

func (c *config) fail(field string, value any, allowed string) {
	if c.err == nil {
		c.err = &deadline.PolicyError{Field: field, Value: value, Allowed: allowed}
	}
}

// WithMaxBudget sets the receiver's maximum (default
// [admission.DefaultMaxBudget], 30 s): an inbound budget larger than d is
// clamped to d, so a sender can never grant this process more time than it
// allows. d <= 0 is invalid, and so is a d at or below the floor.
//
// It sets [admission.Limits].MaxBudget: the rule and its check are shared
// by every transport.
func WithMaxBudget(d time.Duration) Option {
	return optionFunc(func(c *config) { c.limits.MaxBudget = d })
}

// WithFloor sets the receiver's floor (default 0): an inbound budget at or
// below d is refused ([admission.RefusalFloor]); with 0 only a spent budget
// is. d < 0 is invalid, and so is a d at or above the maximum.
//
// It sets [admission.Limits].Floor: the rule and its check are shared
// by every transport.
func WithFloor(d time.Duration) Option {
	return optionFunc(func(c *config) { c.limits.Floor = d })
}

// WithSkewAllowance sets how far the hosts' wall clocks may disagree
// (default [DefaultSkewAllowance]). On a direct hop ([Propagator.Extract])
// the relative budget is kept unless the expiry shows it stale by more
// than d; on a queue ([Propagator.Consume]) an expiry later than the
// relative budget allows by more than d is flagged
// ([Extraction.SkewExceeded]). docs/propagation.md gives the error bounds.
// d < 0 is invalid, and so is a d above deadlinehttp.MaxBudget (about
// 115 days, the longest budget the fields carry).
func WithSkewAllowance(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 || d > deadlinehttp.MaxBudget {
			c.fail("budgetprop.WithSkewAllowance", d, ">= 0 and <= deadlinehttp.MaxBudget")
			return
		}
		c.skew = d
	})
}

// WithClock sets the wall clock the expiry field is written and read with
// (default time.Now). Only the expiry uses it: relative budgets and
// deadlines are always measured on the monotonic clock. Tests use it to
// simulate queue time and clock skew. A nil now is ignored.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now != nil {
			c.clock = now
		}
	})
}

func newConfig(opts []Option) (config, error) {
	c := config{limits: admission.DefaultLimits(), skew: DefaultSkewAllowance, clock: time.Now}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.err == nil {
		c.err = c.limits.Validate()
	}
	return c, c.err
}
