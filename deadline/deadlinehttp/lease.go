package deadlinehttp

import (
	"context"
	"io"
	"sync"
)

// lease is the context one physical attempt runs in. deadline.Do cancels the
// attempt context it hands the op as soon as the op returns, but a response
// returned to the caller is still being read after that. So the lease is
// detached from the attempt context's cancellation while keeping everything
// else about it:
//
//   - its values (the hooks' attempt span, so that an instrumented base
//     transport makes its CLIENT span a child of the attempt);
//   - its deadline and cause (the attempt's grant applies to reading the
//     body too, and context.Cause tells ceiling from shared deadline);
//   - the caller's cancellation (through context.AfterFunc on the request's
//     own context).
//
// release frees the lease: its timer and the AfterFunc registration. It
// runs when the op fails, and otherwise when the response body reaches EOF
// or is closed; it is idempotent.
type lease struct {
	ctx     context.Context
	release func()
}

func newLease(caller, attempt context.Context, cause error) *lease {
	cctx, cancelCause := context.WithCancelCause(context.WithoutCancel(attempt))
	ctx, cancel := cctx, context.CancelFunc(func() {})
	if end, ok := attempt.Deadline(); ok {
		ctx, cancel = context.WithDeadlineCause(cctx, end, cause)
	}
	stop := context.AfterFunc(caller, func() { cancelCause(context.Cause(caller)) })
	var once sync.Once
	return &lease{ctx: ctx, release: func() {
		once.Do(func() {
			stop()
			cancel()
			cancelCause(context.Canceled)
		})
	}}
}

// leasedBody releases its lease when the body is read to EOF or closed.
// Close may be called concurrently with Read, as net/http allows.
type leasedBody struct {
	rc      io.ReadCloser
	release func()
}

func (b *leasedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.release()
	}
	return n, err
}

func (b *leasedBody) Close() error {
	err := b.rc.Close()
	b.release()
	return err
}

// leasedRWBody keeps the io.Writer of a 101 Switching Protocols body.
type leasedRWBody struct {
	leasedBody
	w io.Writer
}

func (b *leasedRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

func wrapBody(rc io.ReadCloser, release func()) io.ReadCloser {
	if w, ok := rc.(io.Writer); ok {
		return &leasedRWBody{leasedBody{rc, release}, w}
	}
	return &leasedBody{rc, release}
}
