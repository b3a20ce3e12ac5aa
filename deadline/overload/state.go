package overload

import "time"

// State is a breaker's state. Its String form is the stable telemetry
// value.
type State uint8

const (
	// Closed: calls go out, and their outcomes are counted.
	Closed State = iota
	// Open: every call is refused at once, until the open time ends.
	Open
	// HalfOpen: a few calls go out as probes; their successes close the
	// breaker, a failure opens it again.
	HalfOpen
)

var stateNames = [...]string{Closed: "closed", Open: "open", HalfOpen: "half_open"}

// String returns "closed", "open" or "half_open" ("unknown" for any other
// value).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Transition is one change of a breaker's state.
type Transition struct {
	From, To State
	// At is when it changed, on the clock of the limiter (a
	// testing/synctest bubble's inside one).
	At time.Time
	// Failures and Calls are the counts that opened a closed breaker
	// (Failures of Calls ended in its window); 0 for other transitions.
	Failures, Calls int
}
