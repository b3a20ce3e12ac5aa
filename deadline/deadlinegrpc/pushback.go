package deadlinegrpc

import (
	"math"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/deadlinebudget/budget/deadline"
)

// PushbackTrailer is the trailer in which a server asks a client to wait
// before its next attempt, in milliseconds (gRFC A6), e.g.
// "grpc-retry-pushback-ms: 500".
const PushbackTrailer = "grpc-retry-pushback-ms"

// ParsePushback reads the values of [PushbackTrailer]. With no value it
// reports present false. One value of ASCII digits is the delay asked for
// (a value too large for a time.Duration saturates at the largest one);
// anything else (a negative or malformed value, several values) reports ok
// false: as gRFC A6 says, the server asks the client not to retry.
func ParsePushback(values []string) (delay time.Duration, present, ok bool) {
	switch len(values) {
	case 0:
		return 0, false, false
	case 1:
	default:
		return 0, true, false
	}
	v := values[0]
	if v == "" {
		return 0, true, false
	}
	const maxMs = int64(math.MaxInt64 / int64(time.Millisecond))
	var ms int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, true, false
		}
		if ms <= maxMs {
			ms = ms*10 + int64(c-'0')
		}
	}
	if ms > maxMs {
		return time.Duration(math.MaxInt64), true, true
	}
	return time.Duration(ms) * time.Millisecond, true, true
}

// PushbackError is an attempt's error when the server's [PushbackTrailer]
// was negative or malformed: the server asked the client not to retry, and
// the client does not, whatever the policy's classifier says. Value is the
// trailer's values joined with ", ". errors.Is and errors.As reach the
// status error it wraps.
type PushbackError struct {
	Err   error
	Value string
}

// Error returns the wrapped error's message and the pushback refused.
func (e *PushbackError) Error() string {
	return e.Err.Error() + " (server pushback " + strconv.Quote(e.Value) + ": do not retry)"
}

// Unwrap returns the status error.
func (e *PushbackError) Unwrap() error { return e.Err }

// ErrorType returns "pushback".
func (e *PushbackError) ErrorType() string { return "pushback" }

// pushback applies the trailer to a retryable attempt error: a valid delay
// becomes a [deadline.RetryAfter], a refusal a [PushbackError].
func pushback(err error, trailer metadata.MD) (error, bool) {
	values := trailer.Get(PushbackTrailer)
	d, present, ok := ParsePushback(values)
	switch {
	case !present:
		return err, true
	case !ok:
		v := ""
		for i, s := range values {
			if i > 0 {
				v += ", "
			}
			v += s
		}
		return &PushbackError{Err: err, Value: v}, false
	}
	return deadline.RetryAfter(err, d), true
}
