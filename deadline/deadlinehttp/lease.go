package deadlinehttp

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/deadlinebudget/budget/deadline"
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
//
// The lease is itself the request's context, so that StopOf finds it (and
// the stop it records) from a response's Request without another
// allocation.
type lease struct {
	context.Context
	cancel      context.CancelFunc // the deadline's timer; nil without one
	cancelCause context.CancelCauseFunc
	stopAfter   func() bool
	released    atomic.Bool

	// stop is why the call stopped on this attempt's response, set before
	// RoundTrip returns that response.
	stop *deadline.StopError
}

type leaseKey struct{}

func newLease(caller, attempt context.Context, cause error) *lease {
	cctx, cancelCause := context.WithCancelCause(context.WithoutCancel(attempt))
	l := &lease{Context: cctx, cancelCause: cancelCause}
	if end, ok := attempt.Deadline(); ok {
		l.Context, l.cancel = context.WithDeadlineCause(cctx, end, cause)
	}
	l.stopAfter = context.AfterFunc(caller, func() { cancelCause(context.Cause(caller)) })
	return l
}

// Value returns the lease for leaseKey, and the attempt context's values.
func (l *lease) Value(key any) any {
	if key == (leaseKey{}) {
		return l
	}
	return l.Context.Value(key)
}

func (l *lease) release() {
	if l.released.Swap(true) {
		return
	}
	l.stopAfter()
	if l.cancel != nil {
		l.cancel()
	}
	l.cancelCause(context.Canceled)
}

// leaseOf returns the lease of the attempt that produced resp: from its
// body, or else (a body replaced by a wrapper, as http.Client does when it
// has a Timeout, or no body) from its Request's context.
func leaseOf(resp *http.Response) *lease {
	if b, ok := resp.Body.(interface{ attemptLease() *lease }); ok {
		return b.attemptLease()
	}
	if resp.Request != nil {
		if l, ok := resp.Request.Context().Value(leaseKey{}).(*lease); ok {
			return l
		}
	}
	return nil
}

// leasedBody releases its lease when the body is read to EOF or closed.
// Close may be called concurrently with Read, as net/http allows.
type leasedBody struct {
	rc io.ReadCloser
	l  *lease
}

func (b *leasedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.l.release()
	}
	return n, err
}

func (b *leasedBody) Close() error {
	err := b.rc.Close()
	b.l.release()
	return err
}

func (b *leasedBody) attemptLease() *lease { return b.l }

// leasedRWBody keeps the io.Writer of a 101 Switching Protocols body.
type leasedRWBody struct {
	leasedBody
	w io.Writer
}

func (b *leasedRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

func wrapBody(rc io.ReadCloser, l *lease) io.ReadCloser {
	if w, ok := rc.(io.Writer); ok {
		return &leasedRWBody{leasedBody{rc, l}, w}
	}
	return &leasedBody{rc, l}
}
