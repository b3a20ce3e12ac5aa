package deadlinegrpc

import (
	"context"
	"sync"
)

// lease is the context one physical stream attempt runs in. deadline.Do
// cancels the attempt context it hands the op as soon as the op returns,
// but a stream returned to the caller is still read after that. So the
// lease is detached from the attempt context's cancellation while keeping
// everything else about it: its values (the attempt's span, so that
// otelgrpc's CLIENT span is the attempt's child), its deadline and cause
// (the attempt's lease bounds the stream and travels as grpc-timeout), and
// the caller's cancellation (through context.AfterFunc on the caller's
// context).
//
// release frees the lease: its timer and the AfterFunc registration, which
// cancels the stream if it still runs. It is idempotent. cancel ends the
// lease with a cause at once, without freeing it (release still must).
type lease struct {
	ctx     context.Context
	release func()
	cancel  func(cause error) // ends ctx with cause, as the caller's cancellation does
}

func newLease(caller, attempt context.Context, cause error) *lease {
	cctx, cancelCause := context.WithCancelCause(context.WithoutCancel(attempt))
	ctx, cancel := cctx, context.CancelFunc(func() {})
	if end, ok := attempt.Deadline(); ok {
		ctx, cancel = context.WithDeadlineCause(cctx, end, cause)
	}
	stop := context.AfterFunc(caller, func() { cancelCause(context.Cause(caller)) })
	var once sync.Once
	return &lease{ctx: ctx, cancel: cancelCause, release: func() {
		once.Do(func() {
			stop()
			cancel()
			cancelCause(context.Canceled)
		})
	}}
}
