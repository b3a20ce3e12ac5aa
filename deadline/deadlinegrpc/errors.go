package deadlinegrpc

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/deadlinebudget/budget/deadline"
)

// Error is the error the client interceptors return when an RPC stops
// without a result: a gRPC status for the code, and the project's typed
// error for the reason. status.FromError, status.Code and status.Convert
// find its status ([Error.GRPCStatus]); errors.As reaches the
// [*deadline.StopError] (its [deadline.Reason], its attempts, the last
// attempt's error) or, for a policy that was invalid at call time, the
// [*deadline.PolicyError]; errors.Is matches the reason's sentinel and the
// last attempt's error, and context.DeadlineExceeded for every budget
// reason.
//
// The code is:
//
//   - DEADLINE_EXCEEDED for the budget reasons ([deadline.Reason.Budget]:
//     refused below the floor, a backoff or a pushback that does not fit,
//     the shared deadline reached);
//   - CANCELLED when the caller canceled;
//   - the last attempt's own code otherwise (not retryable, attempts
//     exhausted), with its details;
//   - INTERNAL for a [*deadline.PolicyError].
//
// The status message is the project's error text, e.g. "pkg.Svc/Get:
// attempts exhausted (after 3 attempts): rpc error: code = Unavailable desc
// = down".
type Error struct {
	err error // *deadline.StopError or *deadline.PolicyError
	st  *status.Status
}

// Error returns the status in grpc-go's form:
// "rpc error: code = DeadlineExceeded desc = …".
func (e *Error) Error() string {
	return "rpc error: code = " + e.st.Code().String() + " desc = " + e.st.Message()
}

// GRPCStatus returns the status: what a gRPC server sends when a handler
// returns this error, and what the status package reads.
func (e *Error) GRPCStatus() *status.Status { return e.st }

// Unwrap returns the [*deadline.StopError] or [*deadline.PolicyError].
func (e *Error) Unwrap() error { return e.err }

// Timeout reports whether the budget stopped the call.
func (e *Error) Timeout() bool { return e.st.Code() == codes.DeadlineExceeded }

// ErrorType returns the stop reason ("attempts_exhausted", …) or
// "invalid_policy", for the semantic-conventions attribute error.type.
func (e *Error) ErrorType() string {
	if t, ok := e.err.(interface{ ErrorType() string }); ok {
		return t.ErrorType()
	}
	return "_OTHER"
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

func stopStatus(stop *deadline.StopError) *status.Status {
	msg := stop.Error()
	switch {
	case stop.Reason.Budget():
		return status.New(codes.DeadlineExceeded, msg)
	case stop.Reason == deadline.ReasonCanceled:
		return status.New(codes.Canceled, msg)
	case stop.Last == nil:
		return status.New(codes.Unknown, msg)
	}
	last, ok := status.FromError(stop.Last)
	if !ok {
		return status.New(codes.Unknown, msg)
	}
	p := last.Proto()
	p.Message = msg
	return status.FromProto(p)
}
