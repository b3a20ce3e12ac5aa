package admission

import (
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// DefaultMaxBudget is the maximum of a server not told otherwise
// ([DefaultLimits]): 30 seconds. Every transport's default.
const DefaultMaxBudget = 30 * time.Second

// Limits is a server's fixed admission limits: its maximum budget and its
// floor. It is the one definition behind every transport's WithMaxBudget
// and WithFloor options (deadlinehttp, deadlinegrpc, deadlinemcp,
// budgetprop): they set it, and [Limits.Validate] checks it, so that the
// rule and its errors are the same everywhere. [Admit] and [Config] take
// it.
type Limits struct {
	// MaxBudget is the largest budget the server grants (> 0): an inbound
	// budget larger is clamped to it, and a call without a usable budget
	// gets it. A client can never grant the server more time than it
	// allows.
	MaxBudget time.Duration
	// Floor is the least budget worth starting (>= 0, below MaxBudget): a
	// call whose effective budget is at or below it is refused
	// ([RefusalFloor]). 0 refuses only a budget already spent.
	Floor time.Duration
}

// DefaultLimits returns the limits of a server not told otherwise:
// MaxBudget [DefaultMaxBudget], Floor 0.
func DefaultLimits() Limits { return Limits{MaxBudget: DefaultMaxBudget} }

// Validate returns nil, or a [*deadline.PolicyError] naming the first
// problem: MaxBudget <= 0, Floor < 0, or a Floor at or above MaxBudget
// (every call would be refused). Its Field is the option that sets the
// limit in every transport, "WithMaxBudget" or "WithFloor", so that the
// error names what the user wrote.
func (l Limits) Validate() error {
	switch {
	case l.MaxBudget <= 0:
		return &deadline.PolicyError{Field: "WithMaxBudget", Value: l.MaxBudget, Allowed: "> 0"}
	case l.Floor < 0:
		return &deadline.PolicyError{Field: "WithFloor", Value: l.Floor, Allowed: ">= 0"}
	case l.Floor >= l.MaxBudget:
		return &deadline.PolicyError{Field: "WithFloor", Value: l.Floor,
			Allowed: "below the maximum budget " + l.MaxBudget.String() + " (WithMaxBudget), or every call is refused"}
	}
	return nil
}
