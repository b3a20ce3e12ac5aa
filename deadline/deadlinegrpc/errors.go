package deadlinegrpc

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/deadlinebudget/budget/deadline"
)

// Error is the error the client interceptors return when an RPC stops
// without a result: a gRPC status for the caller, and the project's typed
// error for the reason. status.FromError, status.Code and status.Convert
// find its status ([Error.GRPCStatus]); errors.As (or [StopOf]) reaches the
// [*deadline.StopError] (its [deadline.Reason], its attempts, the last
// attempt's error) or, for a policy that was invalid at call time, the
// [*deadline.PolicyError]; errors.Is matches the reason's sentinel and the
// last attempt's error, and context.DeadlineExceeded for every budget
// reason.
//
// The status is never rewritten. When the last attempt ended with a status
// (the server's, or the one grpc-go made for it, e.g. DEADLINE_EXCEEDED
// when its lease ended), it is that status, unchanged: code, message and
// details, whatever the stop reason, as deadlinehttp returns the last
// answer. Only when no attempt produced a status does the client make one,
// with the project's text as its message:
//
//   - DEADLINE_EXCEEDED for a budget reason ([deadline.Reason.Budget]), e.g.
//     refused below the floor before the first attempt;
//   - CANCELLED when the caller canceled;
//   - UNKNOWN otherwise (an interceptor further down returned a plain error);
//   - INTERNAL for a [*deadline.PolicyError].
//
// Error returns the status in grpc-go's form, "rpc error: code = … desc =
// …", identical to the error the server's status would be without the
// interceptors.
type Error struct {
	err error // *deadline.StopError or *deadline.PolicyError
	st  *status.Status
}

// Error returns the status in grpc-go's form:
// "rpc error: code = Unavailable desc = down".
func (e *Error) Error() string {
	return "rpc error: code = " + e.st.Code().String() + " desc = " + e.st.Message()
}

// GRPCStatus returns the status: what a gRPC server sends when a handler
// returns this error, and what the status package reads.
func (e *Error) GRPCStatus() *status.Status { return e.st }

// Unwrap returns the [*deadline.StopError] or [*deadline.PolicyError].
func (e *Error) Unwrap() error { return e.err }

// Timeout reports whether the budget stopped the call
// ([deadline.Reason.Budget]), whatever the status's code.
func (e *Error) Timeout() bool {
	stop, ok := e.err.(*deadline.StopError)
	return ok && stop.Reason.Budget()
}

// ErrorType returns the stop reason ("attempts_exhausted", …) or
// "invalid_policy", for the semantic-conventions attribute error.type.
func (e *Error) ErrorType() string {
	if t, ok := e.err.(interface{ ErrorType() string }); ok {
		return t.ErrorType()
	}
	return "_OTHER"
}

// StopOf returns the [*deadline.StopError] that says why an RPC made
// through a [Client] stopped without a result, found in err by errors.As;
// false when err is nil or did not come from a Client's stop (an error of
// a stream read after its first message, a caller's own error). It mirrors
// deadlinehttp's StopOf: the status says what the server answered, StopOf
// why the client did not try again.
func StopOf(err error) (*deadline.StopError, bool) {
	return errors.AsType[*deadline.StopError](err)
}

// wrapError turns what deadline.Do returned into an [*Error].
func wrapError(err error) error {
	if err == nil {
		return nil
	}
	if stop, ok := errors.AsType[*deadline.StopError](err); ok {
		return &Error{err: stop, st: stopStatus(stop)}
	}
	if pe, ok := errors.AsType[*deadline.PolicyError](err); ok {
		return &Error{err: pe, st: status.New(codes.Internal, pe.Error())}
	}
	return err
}

// stopStatus returns the status of a stop: the last attempt's own, or one
// made from the reason when no attempt produced a status.
func stopStatus(stop *deadline.StopError) *status.Status {
	if st, ok := lastStatus(stop.Last); ok {
		return st
	}
	msg := stop.Error()
	switch {
	case stop.Reason.Budget():
		return status.New(codes.DeadlineExceeded, msg)
	case stop.Reason == deadline.ReasonCanceled:
		return status.New(codes.Canceled, msg)
	}
	return status.New(codes.Unknown, msg)
}

// lastStatus finds the status an attempt's error carries, as it came: not
// status.FromError's, which rewrites the message of a wrapped status with
// the wrapper's text.
func lastStatus(err error) (*status.Status, bool) {
	if err == nil {
		return nil, false
	}
	g, ok := errors.AsType[interface {
		error
		GRPCStatus() *status.Status
	}](err)
	if !ok {
		return nil, false
	}
	st := g.GRPCStatus()
	if st == nil || st.Code() == codes.OK {
		return nil, false
	}
	return st, true
}
