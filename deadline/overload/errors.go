package overload

import (
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline/internal/readable"
)

// The sentinels of a refusal: errors.Is matches a [*RefusedError] to the
// one of its [Cause]. Package deadline re-exports the same values
// (deadline.ErrLimited is ErrLimited), so a call refused through [Do] and
// the refusal itself match the same sentinel. None of them matches
// context.DeadlineExceeded: the downstream's capacity or health, not the
// caller's budget, refused the call. Their ErrorType is the stable
// telemetry value.
//
// [Do]: https://pkg.go.dev/github.com/deadlinebudget/budget/deadline#Do
var (
	// ErrLimited: a [Limiter] refused the call: its queue full, the call
	// unable to finish from its place in it, or its wait in a standing
	// queue over ([CauseQueueFull], [CauseQueueTimeout],
	// [CauseStandingQueue]). Its ErrorType is "limited".
	ErrLimited error = &sentinel{"deadline: limited: the downstream is at its concurrency limit", "limited"}
	// ErrDownstreamOpen: a [Breaker] is open, or half-open with no probe
	// the call's budget could afford ([CauseOpen]). Its ErrorType is
	// "downstream_open".
	ErrDownstreamOpen error = &sentinel{"deadline: downstream open", "downstream_open"}
	// ErrThrottled: a [Throttle] dropped the call ([CauseThrottled]). Its
	// ErrorType is "throttled".
	ErrThrottled error = &sentinel{"deadline: throttled on the client", "throttled"}
)

type sentinel struct{ msg, typ string }

func (e *sentinel) Error() string { return e.msg }

// ErrorType returns the stable name, for error.type.
func (e *sentinel) ErrorType() string { return e.typ }

// Cause says why a call was refused before it went out ([RefusedError]).
// Its String form is the stable telemetry value.
type Cause uint8

const (
	// CauseNone: not refused.
	CauseNone Cause = iota
	// CauseQueueFull: every slot was taken and the backlog full: the
	// downstream is at its limit, whatever the budget ([ErrLimited]).
	CauseQueueFull
	// CauseQueueTimeout: the call could not finish from its place in the
	// queue, on arrival or while it waited: what was left of its budget no
	// longer covered the wait and what it needs ([ErrLimited]).
	CauseQueueTimeout
	// CauseOpen: the breaker is open, or half-open with no probe the
	// call's budget could afford ([ErrDownstreamOpen]).
	CauseOpen
	// CauseThrottled: client-side throttling dropped the call: the
	// downstream has been refusing many of the recent calls ([Throttle],
	// [ErrThrottled]).
	CauseThrottled
	// CauseStandingQueue: the queue was standing (it had held waiting
	// calls for [LIFOAfter] without a break) and the call waited in it as
	// long as such a queue lets a call wait ([Limiter], "Standing queue"),
	// with budget left: the downstream is at its limit ([ErrLimited]).
	CauseStandingQueue
)

var causeNames = [...]string{
	CauseNone:          "none",
	CauseQueueFull:     "queue_full",
	CauseQueueTimeout:  "queue_timeout",
	CauseOpen:          "open",
	CauseThrottled:     "throttled",
	CauseStandingQueue: "standing_queue",
}

// String returns the stable name: "none", "queue_full", "queue_timeout",
// "open", "throttled" or "standing_queue" ("unknown" for any other value).
func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return "unknown"
}

// Sentinel returns the sentinel errors.Is matches for c: [ErrLimited],
// [ErrDownstreamOpen] or [ErrThrottled]; nil for CauseNone.
func (c Cause) Sentinel() error {
	switch c {
	case CauseQueueFull, CauseQueueTimeout, CauseStandingQueue:
		return ErrLimited
	case CauseOpen:
		return ErrDownstreamOpen
	case CauseThrottled:
		return ErrThrottled
	}
	return nil
}

// RefusedError is a call refused before it went out by a [Limiter], its
// [Breaker] or a [Throttle]: nothing was sent. errors.Is matches the
// sentinel of its cause ([Cause.Sentinel]); none matches
// context.DeadlineExceeded.
type RefusedError struct {
	Cause Cause
	// Limit is the limiter's limit when it decided (0 for throttling).
	Limit int
	// Position is the call's place in the queue (1 the next served) when
	// it arrived, or would have had; for a waiting call a full backlog
	// evicted, its place then (the last, beyond the backlog); 0 for the
	// breaker and throttling.
	Position int
	// Queued reports that it waited in the queue before it was refused.
	Queued bool
	// Waited is how long it waited in the queue.
	Waited time.Duration
	// Need is what the call needed to finish once started (its learned
	// service time, or the floor).
	Need time.Duration
	// Remaining is what was left of its budget when it was refused (0
	// without a deadline).
	Remaining time.Duration
}

// Error says why, e.g. "deadline: limited (queue_timeout): position 3 at
// limit 50, 20ms left, 40ms needed".
func (e *RefusedError) Error() string {
	switch e.Cause {
	case CauseOpen:
		return fmt.Sprintf("deadline: downstream open (%s left)", readable.Duration(e.Remaining.Round(time.Millisecond/10)))
	case CauseThrottled:
		return "deadline: throttled on the client: the downstream refused too many recent calls"
	}
	return fmt.Sprintf("deadline: limited (%s): position %d at limit %d, %s left, %s needed", e.Cause, e.Position, e.Limit,
		readable.Duration(e.Remaining.Round(time.Millisecond/10)), readable.Duration(e.Need.Round(time.Millisecond/10)))
}

// Is matches the cause's sentinel.
func (e *RefusedError) Is(target error) bool {
	return target != nil && target == e.Cause.Sentinel()
}

// ErrorType returns the stable name of the cause's sentinel, for
// error.type: "limited", "downstream_open" or "throttled".
func (e *RefusedError) ErrorType() string {
	if s, ok := e.Cause.Sentinel().(*sentinel); ok {
		return s.typ
	}
	return "none"
}

// OptionError reports an invalid option or argument: which one, the value
// given, and what is allowed. Its ErrorType is "invalid_policy", as for
// package deadline's PolicyError.
type OptionError struct {
	Option  string // e.g. "overload.WithBacklog"
	Value   any    // the value given
	Allowed string // e.g. ">= 0"
}

// Error says which option was wrong, its value and what is allowed, e.g.
// "overload: invalid overload.WithBacklog -1: must be >= 0".
func (e *OptionError) Error() string {
	v := e.Value
	if d, ok := v.(time.Duration); ok {
		v = readable.Duration(d)
	}
	return fmt.Sprintf("overload: invalid %s %v: must be %s", e.Option, v, e.Allowed)
}

// ErrorType returns "invalid_policy".
func (e *OptionError) ErrorType() string { return "invalid_policy" }
