package deadlinegrpc

import (
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// statusError is an attempt's error that carries a gRPC status, as the
// engine's hooks see it: its text and status are the status's own, and
// ErrorType gives the status code's canonical name, the semantic
// conventions' error.type of a gRPC call (what otelgrpc writes).
type statusError struct {
	err error // grpc-go's status error
	st  *status.Status
}

func (e *statusError) Error() string              { return e.err.Error() }
func (e *statusError) Unwrap() error              { return e.err }
func (e *statusError) GRPCStatus() *status.Status { return e.st }

// ErrorType returns the status code's canonical name, e.g. "UNAVAILABLE".
func (e *statusError) ErrorType() string { return codeName(e.st.Code()) }

// withStatus wraps an attempt's error that carries a status (directly, not
// through a wrapper) in a statusError; any other error is returned as it is.
func withStatus(err error) error {
	g, ok := err.(interface{ GRPCStatus() *status.Status })
	if !ok {
		return err
	}
	st := g.GRPCStatus()
	if st == nil || st.Code() == codes.OK {
		return err
	}
	return &statusError{err: err, st: st}
}

// codeName is the canonical name of a status code, as in the gRPC
// specification (statuscodes.md) and otelgrpc.
func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "CODE(" + strconv.FormatInt(int64(c), 10) + ")"
}

var codeNames = [...]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}
