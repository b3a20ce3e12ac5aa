package deadlinegrpc

import (
	"context"
	"sync"
)

// lease is the context one physical stream attempt runs in. deadline.Do
// cancels the attempt context it hands the op as soon as the op returns,
// but a stream returned to the caller is still read after that. So the
// lease is a child of the caller's context, not of the attempt's: the
// caller's cancellation ends it at once, within the caller's cancel, as it
// ends a stream opened without the interceptors. It keeps everything else
// about the attempt context: its values (the attempt's span, so that
// otelgrpc's CLIENT span is the attempt's child; see leaseCtx), its
// deadline and cause (the attempt's lease bounds the stream and travels as
// grpc-timeout).
//
// release frees the lease: its timer, and its registration in the caller's
// context; it cancels the stream if it still runs. It is idempotent.
type lease struct {
	ctx     context.Context
	release func()
}

func newLease(caller, attempt context.Context, cause error) *lease {
	cctx, cancelCause := context.WithCancelCause(caller)
	ctx, cancel := cctx, context.CancelFunc(func() {})
	if end, ok := attempt.Deadline(); ok {
		ctx, cancel = context.WithDeadlineCause(cctx, end, cause)
	}
	var once sync.Once
	return &lease{ctx: &leaseCtx{Context: ctx, attempt: attempt}, release: func() {
		once.Do(func() {
			cancel()
			cancelCause(context.Canceled)
		})
	}}
}

// leaseCtx is a lease's context: the cancellation and deadline of its own
// chain (a child of the caller's context), the values of the attempt
// context, which holds the caller's and those deadline.Do and its hooks
// added.
type leaseCtx struct {
	context.Context
	attempt context.Context
}

// Value returns the attempt context's value for key, except a context: the
// context package finds a parent's cancellation under a key of its own,
// whose value is that parent, and the lease's must be found there, so that
// a context derived from the lease (grpc-go's stream context) is canceled
// with it at once, and not by a goroutine watching it.
func (c *leaseCtx) Value(key any) any {
	v := c.attempt.Value(key)
	if _, isContext := v.(context.Context); isContext {
		return c.Context.Value(key)
	}
	return v
}
