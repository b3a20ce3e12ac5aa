// Package peers puts each retry library compared in docs/benchmarks.md behind
// one small interface, [Retrier], so that every scenario drives every library
// the same way.
//
// Each adapter lives in its own file and configures its library the way that
// library's own documentation recommends for "an overall time limit plus a
// per-attempt timeout, exponential backoff with jitter", in its most
// favourable setting; the configuration is written in the adapter's doc
// comment and returned by [Retrier.Config] so the published tables can quote
// it.
//
// The operation an adapter runs is an [Op]. It reports failures as ordinary
// errors; [Failure] marks the ones a server would call retryable and may carry
// a Retry-After delay. Each adapter translates that into its library's own
// idiom (a wrapped error, a classifier, a delay function), so that no library
// is denied a feature it has.
package peers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Call is the one policy every adapter is configured from: the numbers of
// scenario 1 in the issue, or those of the goodput plan.
type Call struct {
	// Budget is the overall time limit of the call, from the moment Do is
	// called. Every adapter sets its library's own overall limit to it (where
	// the library has one); the caller may also put a deadline on the context.
	Budget time.Duration
	// AttemptTimeout is the fixed per-attempt timeout.
	AttemptTimeout time.Duration
	// BackoffBase and BackoffMax bound the exponential backoff: the first
	// delay is about BackoffBase and no delay exceeds BackoffMax (before the
	// library's own jitter, for libraries that jitter around the value).
	BackoffBase, BackoffMax time.Duration
	// MaxAttempts counts the first attempt.
	MaxAttempts int
	// Floor is the reserve below which this project refuses to start an
	// attempt. Only the project's adapter uses it: no peer has the notion.
	Floor time.Duration
}

// Validate reports the first field that is out of range.
func (c Call) Validate() error {
	switch {
	case c.Budget <= 0:
		return fmt.Errorf("peers: Call.Budget is %v, want > 0", c.Budget)
	case c.AttemptTimeout <= 0:
		return fmt.Errorf("peers: Call.AttemptTimeout is %v, want > 0", c.AttemptTimeout)
	case c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("peers: Call backoff is base %v max %v, want 0 < base <= max", c.BackoffBase, c.BackoffMax)
	case c.MaxAttempts < 1:
		return fmt.Errorf("peers: Call.MaxAttempts is %d, want >= 1", c.MaxAttempts)
	case c.Floor < 0:
		return fmt.Errorf("peers: Call.Floor is %v, want >= 0", c.Floor)
	}
	return nil
}

// Scenario1 is the policy of the scenarios 1 and 2: budget 1s,
// per-attempt 400ms, backoff base 100ms cap 400ms, at most 5 attempts, and
// this project's 20ms floor.
func Scenario1() Call {
	return Call{
		Budget: time.Second, AttemptTimeout: 400 * time.Millisecond,
		BackoffBase: 100 * time.Millisecond, BackoffMax: 400 * time.Millisecond,
		MaxAttempts: 5, Floor: 20 * time.Millisecond,
	}
}

// Op is one attempt of the operation. It must honour ctx.
type Op func(ctx context.Context) error

// Retrier runs an Op with retries under one library's configuration.
type Retrier interface {
	// Name is the library's short name, as printed in the tables.
	Name() string
	// Config describes how the library is configured from a Call, in one
	// line, for the published tables.
	Config() string
	// Do runs op until it succeeds, the library gives up, or ctx ends, and
	// returns the library's final error (nil on success). ctx may or may not
	// carry a deadline; the library's own overall limit is c.Budget.
	Do(ctx context.Context, c Call, op Op) error
}

// Failure is the error an Op returns for a failure the remote side would call
// transient (a 503, a 429, a connection reset), optionally with the delay the
// server asked for.
type Failure struct {
	Status     int           // HTTP status, 0 for a transport failure
	RetryAfter time.Duration // > 0 when the server asked for a delay
	Err        error         // the transport error, if any
	// Header holds other response headers of the answer (e.g. a server's
	// Deadline-Refused), for the adapters that go through HTTP; nil for
	// none.
	Header http.Header
}

// Error describes the failure.
func (f *Failure) Error() string {
	switch {
	case f.Err != nil:
		return "transient failure: " + f.Err.Error()
	case f.RetryAfter > 0:
		return fmt.Sprintf("transient failure: status %d, Retry-After %v", f.Status, f.RetryAfter)
	}
	return fmt.Sprintf("transient failure: status %d", f.Status)
}

// Unwrap returns the transport error, if any.
func (f *Failure) Unwrap() error { return f.Err }

// Retryable reports whether err should be retried by the user's classifier:
// a [Failure], or a timeout (an attempt that ran out of its per-attempt
// limit reports context.DeadlineExceeded). Every adapter uses this one rule,
// in its library's idiom.
func Retryable(err error) bool {
	if _, ok := errors.AsType[*Failure](err); ok {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// RetryAfterOf returns the delay a [Failure] in err's chain asked for.
func RetryAfterOf(err error) (time.Duration, bool) {
	if f, ok := errors.AsType[*Failure](err); ok && f.RetryAfter > 0 {
		return f.RetryAfter, true
	}
	return 0, false
}

// All returns one Retrier per library, in the order of the tables: this
// project first, then the peers, then the hand-written baseline.
func All() []Retrier {
	return []Retrier{Deadline{}, Failsafe{}, Cenkalti{}, Avast{}, Sethvargo{}, Baseline{}}
}

func secondsToDuration(n int) time.Duration { return time.Duration(n) * time.Second }
