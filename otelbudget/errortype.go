package otelbudget

import (
	"context"

	"github.com/deadlinebudget/budget/deadline"
)

// The values of error.type the observer sets besides the stop reasons and
// HTTP status codes. docs/attributes.md lists the whole set.
const (
	errTypeAttemptTimeout = "attempt_timeout"
	errTypeDeadline       = "deadline_exceeded"      // = deadline.ReasonDeadline.String()
	errTypeCanceled       = "canceled"               // = deadline.ReasonCanceled.String()
	errTypePanic          = "panic"                  // = deadline.ReasonPanic.String()
	errTypeInvalidPolicy  = "invalid_policy"         // deadline.PolicyError
	errTypeRefused        = ErrorTypeServerRefused   // a server's refusal as its caller sees it (mcpbudget.RefusedError): its SERVER span's value
	errTypeQueueFull      = ErrorTypeServerQueueFull // the same, when the server's admission queue was full
	errTypePushback       = "pushback"               // deadlinegrpc.PushbackError: the server's pushback refused a retry
	errTypeToolAbandoned  = "tool_abandoned"         // agentrun.AbandonedError: a tool that did not return within its lease
	errTypeToolPanic      = "tool_panic"             // agentrun.PanicError: a tool that panicked, recovered on its goroutine
	errTypeOther          = "_OTHER"                 // semantic conventions: none of the above
)

// lastReason is the last stop reason this version knows.
const lastReason = deadline.ReasonThrottled

// attemptErrorType is the error.type of an attempt that did not complete:
// what ended it when a limit or the caller did, else the error's type.
func attemptErrorType(r deadline.AttemptResult) string {
	switch r.EndedBy {
	case deadline.EndedAttemptTimeout:
		return errTypeAttemptTimeout
	case deadline.EndedDeadline:
		return errTypeDeadline
	case deadline.EndedCanceled:
		return errTypeCanceled
	case deadline.EndedPanic:
		return errTypePanic
	}
	return errorType(r.Err)
}

// callErrorType is the error.type of a call that did not succeed: its stop
// reason, or "_OTHER" for a reason this version does not know.
func callErrorType(r deadline.Reason) string {
	if s := r.String(); documented(s) {
		return s
	}
	return errTypeOther
}

// errorType maps err to one value of a fixed, low-cardinality set, so that a
// dashboard can group by error.type: walking err's chain depth first (as
// errors.As does), the first error that is one of the deadline package's
// sentinels or a context error gives its meaning (ErrCeilingReached:
// "attempt_timeout"; ErrDeadlineReached and context.DeadlineExceeded:
// "deadline_exceeded"; ErrCanceled and context.Canceled: "canceled"; the
// other sentinels: their stop reason), and the first ErrorType() string
// method whose value is in the set gives that value (a
// deadlinehttp.StatusError its status code, a StopError its stop reason, an
// AttemptTimeoutError "attempt_timeout", an attempt error of deadlinegrpc
// its gRPC status code's name, a gRPC server's pushback that refused the
// retry (deadlinegrpc.PushbackError) "pushback" before the status code it
// wraps, an MCP server's refusal (mcpbudget.RefusedError)
// "deadline_refused", or "queue_full" when the server's admission queue
// was full, an agent's tool (agentrun.AbandonedError, agentrun.PanicError)
// "tool_abandoned" or "tool_panic" before its lease's cause). The
// nested modules' types are found by their ErrorType() value, which this
// package cannot import. Anything else, Go type names and unknown
// ErrorType() values included, is "_OTHER".
func errorType(err error) string {
	if err == nil {
		return errTypeOther
	}
	if s, ok := knownErrorType(err); ok {
		return s
	}
	return errTypeOther
}

func knownErrorType(err error) (string, bool) {
	for err != nil {
		switch err {
		case deadline.ErrCeilingReached:
			return errTypeAttemptTimeout, true
		case context.DeadlineExceeded:
			return errTypeDeadline, true
		case context.Canceled:
			return errTypeCanceled, true
		}
		for r := deadline.ReasonNotRetryable; r <= lastReason; r++ {
			if s := r.Sentinel(); s != nil && err == s {
				return r.String(), true
			}
		}
		if t, ok := err.(interface{ ErrorType() string }); ok {
			if s := t.ErrorType(); documented(s) {
				return s, true
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if s, ok := knownErrorType(e); ok {
					return s, true
				}
			}
			return "", false
		default:
			return "", false
		}
	}
	return "", false
}

// documented reports whether s is in the set of error.type values
// docs/attributes.md lists: the project's own, the stop reasons, an HTTP
// status code and a gRPC code's name.
func documented(s string) bool {
	switch s {
	case errTypeAttemptTimeout, errTypeCanceled, errTypePanic, errTypeInvalidPolicy, errTypeRefused, errTypeQueueFull,
		errTypePushback, errTypeToolAbandoned, errTypeToolPanic, errTypeOther:
		return true
	}
	for r := deadline.ReasonNotRetryable; r <= lastReason; r++ {
		if s == r.String() {
			return true
		}
	}
	return isStatusCode(s) || isGRPCCode(s)
}

// isGRPCCode reports whether s is the canonical name of a gRPC status code
// other than OK, as the semantic conventions (and otelgrpc) write it in
// error.type and rpc.response.status_code: "UNAVAILABLE",
// "RESOURCE_EXHAUSTED", … (deadlinegrpc's attempt errors report it).
func isGRPCCode(s string) bool {
	switch s {
	case "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
		"PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
		"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED":
		return true
	}
	return false
}

// isStatusCode reports whether s is an HTTP status code, 100 to 599, as
// otelhttp and deadlinehttp.StatusError write it.
func isStatusCode(s string) bool {
	return len(s) == 3 && s[0] >= '1' && s[0] <= '5' && s[1] >= '0' && s[1] <= '9' && s[2] >= '0' && s[2] <= '9'
}
