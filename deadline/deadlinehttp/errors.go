package deadlinehttp

import (
	"net/http"
	"strconv"
	"time"
)

// MaxDrain is the most of a discarded response body the [Transport] reads:
// 64 KiB. A body read to its end lets the connection be reused; a longer one
// is closed unread past this point (the connection is then closed, never
// leaked). The bytes read are kept in [StatusError.Response].
const MaxDrain = 64 << 10

// MaxDrainTime is the longest the [Transport] spends draining a discarded
// response body: 50 milliseconds, and never past the attempt's lease nor
// more than half of what the retry it makes way for would be granted. A
// body still arriving then (a server trickling its error page) is closed
// where it stands, its connection with it, so that the wait it would cost
// goes to the retry instead. [StatusError.Truncated] then says so.
const MaxDrainTime = 50 * time.Millisecond

// StatusError is the error a [Transport] attempt ends with when the server
// answers one of the retryable status codes ([WithRetryStatuses]). The
// hooks see it as the attempt's error, and a [*deadline.StopError] returned
// by [StopOf] has it as its last error.
//
// Response is the answer. When the call stopped on it, it is the response
// RoundTrip returned, its body unread. When a retry followed, its body was
// drained and closed before the retry, and Response.Body now reads the
// bytes drained: the whole body, or its beginning when Truncated is true.
type StatusError struct {
	Response  *http.Response
	Attempt   int  // the attempt that received the response, 1 for the first
	Truncated bool // the drained body was not read to its end (MaxDrain, MaxDrainTime or a read error)

	advice advice // what the response's ShouldRetryHeader says
}

// Error returns the status, e.g. "HTTP 503 Service Unavailable".
func (e *StatusError) Error() string {
	return "HTTP " + e.status()
}

// StatusCode returns the response's status code.
func (e *StatusError) StatusCode() int { return e.Response.StatusCode }

// ErrorType returns the status code as a string ("503"), the value the
// OpenTelemetry semantic conventions give error.type for an HTTP status.
func (e *StatusError) ErrorType() string { return strconv.Itoa(e.Response.StatusCode) }

func (e *StatusError) status() string {
	if e.Response.Status != "" {
		return e.Response.Status
	}
	return strconv.Itoa(e.Response.StatusCode) + " " + http.StatusText(e.Response.StatusCode)
}
