package deadlinegrpc

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/deadlinebudget/budget/deadline"
)

// StreamInterceptor returns the client's stream interceptor; see [Client].
//
// A server-streaming method (one request, many responses) that is safe to
// repeat is opened lazily: the request and CloseSend are kept until the
// caller first calls RecvMsg or Header, and then the stream runs under
// [deadline.Do], an attempt being one physical stream that ends at its
// first response message (or its headers, when Header was called first),
// or at its status. A failed attempt is retried like a unary RPC, the
// request sent again (a proto message is cloned when sent, so the caller
// may reuse it). With a policy that hedges ([deadline.Policy.Hedge]) and a
// proto message to read into, the attempts up to the first event are
// hedged: a stream is opened beside one that has had no first event for
// the hedge delay, the first to get one wins, and the others are canceled
// at once. Once a response message or the headers reached the caller
// nothing is retried: a later error is the stream's own, returned as it is.
// An error that stops the call is an [*Error] (the last attempt's status,
// unchanged), returned by that RecvMsg (or Header) and every later one.
//
// A stream of a long-lived method ([WithExemptMethods]) opened without any
// deadline is opened once, as it is, without a budget.
//
// Every other stream (client-streaming, bidirectional, or a method not safe
// to repeat) is opened at once under [deadline.Do]: only a failure to open
// it, before any message was sent, is retried, and only for a method safe to
// repeat; its messages are never replayed.
//
// Either way the stream runs in its attempt's lease: its context's deadline
// is the lease (sent as grpc-timeout), the caller's cancellation ends it,
// and its resources are freed when RecvMsg returns an error (io.EOF
// included). As with any gRPC stream, the caller must read it to the end or
// cancel its context.
func (c *Client) StreamInterceptor() grpc.StreamClientInterceptor {
	return c.streamGuarded
}

func (c *Client) streamGuarded(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.stream(ctx, desc, cc, method, streamer, true, opts)
}

func (c *Client) streamNoGRPCRetry(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.stream(ctx, desc, cc, method, streamer, false, opts)
}

func (c *Client) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, guard bool, opts []grpc.CallOption) (grpc.ClientStream, error) {
	m := c.method(method)
	if m.exempt && unbounded(ctx) {
		return streamer(ctx, desc, cc, method, opts...) // a long-lived stream: no budget (see WithExemptMethods)
	}
	s := &clientStream{c: c, caller: ctx, desc: desc, cc: cc, method: method, state: m, streamer: streamer, guard: guard, opts: opts}
	if !desc.ClientStreams && desc.ServerStreams && m.safe {
		return s, nil // opened by the first RecvMsg or Header
	}
	d, p, commit := c.prepare(ctx, cc, method, m, true, guard)
	noHedge(&p) // only a stream opened lazily may be hedged (see run)
	if commit {
		opts = append(opts[:len(opts):len(opts)], commitAtFirstSend)
	}
	_, err := deadline.Do(ctx, d, p, func(actx context.Context, a deadline.AttemptInfo) (struct{}, error) {
		l := newLease(ctx, actx, leaseCause(a))
		cs, err := streamer(l.ctx, desc, cc, method, opts...)
		if err != nil {
			l.release()
			return struct{}{}, c.mark(err, nil)
		}
		s.cur, s.lease, s.done = cs, l, true
		return struct{}{}, nil
	})
	if err != nil {
		return nil, wrapError(err)
	}
	return s, nil
}

func leaseCause(a deadline.AttemptInfo) error {
	if a.LimitedBy == deadline.LimitCeiling {
		return deadline.ErrCeilingReached
	}
	return deadline.ErrDeadlineReached
}

// clientStream is the stream the interceptor returns. Before the call runs
// (lazy mode) it keeps what the caller sends; then it forwards everything
// to the current attempt's stream.
type clientStream struct {
	c        *Client
	caller   context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	state    *methodState
	streamer grpc.Streamer
	guard    bool // installed by hand: grpc-go's own retry may be on
	opts     []grpc.CallOption

	mu     sync.Mutex
	sent   []any // lazy mode: the messages to send on each attempt
	closed bool  // lazy mode: CloseSend was called
	done   bool  // the call ran: cur and lease, or err, are final
	cur    grpc.ClientStream
	lease  *lease
	header metadata.MD // the headers read by the attempt that Header started
	err    error       // the call's error, returned by every RecvMsg and Header
	eof    bool        // the first RecvMsg found the stream empty
}

func (s *clientStream) SendMsg(m any) error {
	s.mu.Lock()
	if !s.done {
		if pm, ok := m.(proto.Message); ok {
			m = proto.Clone(pm)
		}
		s.sent = append(s.sent, m)
		s.mu.Unlock()
		return nil
	}
	cur, err := s.cur, s.err
	s.mu.Unlock()
	if cur == nil {
		return err
	}
	return cur.SendMsg(m)
}

func (s *clientStream) CloseSend() error {
	s.mu.Lock()
	if !s.done {
		s.closed = true
		s.mu.Unlock()
		return nil
	}
	cur := s.cur
	s.mu.Unlock()
	if cur == nil {
		return nil
	}
	return cur.CloseSend()
}

func (s *clientStream) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return s.cur.Context()
	}
	return s.caller
}

func (s *clientStream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return s.cur.Trailer()
	}
	return nil
}

func (s *clientStream) Header() (metadata.MD, error) {
	if first, err := s.run(nil, true); first {
		if err == io.EOF {
			return nil, nil // no headers: RecvMsg returns the status (io.EOF)
		}
		s.mu.Lock()
		md := s.header
		s.mu.Unlock()
		return md, err
	}
	s.mu.Lock()
	cur, err := s.cur, s.err
	s.mu.Unlock()
	if cur == nil {
		return nil, err
	}
	return cur.Header()
}

func (s *clientStream) RecvMsg(m any) error {
	if first, err := s.run(m, false); first {
		if err != nil {
			s.finish()
		}
		return err
	}
	s.mu.Lock()
	cur, err, eof := s.cur, s.err, s.eof
	s.mu.Unlock()
	if cur == nil {
		return err
	}
	if eof {
		return io.EOF
	}
	err = cur.RecvMsg(m)
	if err != nil {
		s.finish()
	}
	return err
}

// finish frees the lease once the stream has ended.
func (s *clientStream) finish() {
	s.mu.Lock()
	l := s.lease
	s.mu.Unlock()
	if l != nil {
		l.release()
	}
}

// run runs the lazy call if it has not run yet, reading m (or the headers)
// as its first event. It reports first true when this call ran it, with
// what the caller must get.
func (s *clientStream) run(m any, header bool) (first bool, err error) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return false, nil
	}
	s.done = true // the caller must not call RecvMsg from two goroutines
	sent, closed := s.sent, s.closed
	s.sent = nil
	s.mu.Unlock()

	d, p, commit := s.c.prepare(s.caller, s.cc, s.method, s.state, true, s.guard)
	opts := s.opts
	if commit {
		opts = append(opts[:len(opts):len(opts)], commitAtFirstSend)
	}
	f := firstEvent{sent: sent, closed: closed, header: header, opts: opts}
	var won *streamAttempt
	if pm, ok := m.(proto.Message); hedges(p) && (header || ok && pm != nil) {
		won, err = s.runHedged(d, p, f, pm)
	} else {
		noHedge(&p) // concurrent attempts need a message each
		won, err = deadline.Do(s.caller, d, p, func(actx context.Context, a deadline.AttemptInfo) (*streamAttempt, error) {
			return s.attempt(actx, a, f, m)
		})
	}
	if err != nil {
		err = wrapError(err)
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		return true, err
	}
	s.mu.Lock()
	s.cur, s.lease, s.header, s.eof = won.cs, won.lease, won.header, won.eof
	s.mu.Unlock()
	if won.eof {
		s.finish()
		return true, io.EOF
	}
	return true, nil
}

// firstEvent is what every attempt of a lazy stream sends, and what it
// waits for: its first message, or its headers when header is set.
type firstEvent struct {
	sent   []any
	closed bool
	header bool
	hedged bool // attempts run at once: a loser is canceled when it loses
	opts   []grpc.CallOption
}

// streamAttempt is an attempt of a lazy stream that reached its first
// event: the stream, its lease, the headers read (when Header came first),
// and whether the stream ended with an OK status and no message.
type streamAttempt struct {
	cs     grpc.ClientStream
	lease  *lease
	header metadata.MD
	msg    proto.Message // a hedged attempt's first message
	eof    bool
}

// attempt opens one physical stream in a lease of its own, sends the kept
// messages and waits for the first event, read into m.
func (s *clientStream) attempt(actx context.Context, a deadline.AttemptInfo, f firstEvent, m any) (*streamAttempt, error) {
	l := newLease(s.caller, actx, leaseCause(a))
	cs, err := s.streamer(l.ctx, s.desc, s.cc, s.method, f.opts...)
	if err != nil {
		l.release()
		return nil, s.c.mark(err, nil)
	}
	if f.hedged {
		// Runs once, when the engine ends actx: a losing attempt's
		// stream is canceled at once, also while it waits for its first
		// event (the winner's lives on in its lease).
		context.AfterFunc(actx, func() {
			if context.Cause(actx) == deadline.ErrHedgeLost {
				l.release()
			}
		})
	}
	r := &streamAttempt{cs: cs, lease: l}
	err = replay(cs, f.sent, f.closed)
	if err == nil {
		if f.header {
			r.header, err = cs.Header()
			if err == nil && r.header == nil {
				// The stream ended without headers: its status comes
				// from RecvMsg (no message is decoded).
				err = cs.RecvMsg(nil)
			}
		} else {
			err = cs.RecvMsg(m)
		}
	}
	if err == io.EOF {
		// An OK status and no message: nothing to retry.
		err, r.eof = nil, true
	}
	if err != nil {
		if _, bounded := actx.Deadline(); bounded && l.ctx.Err() != nil {
			// The lease ended the attempt at the attempt context's
			// deadline: let deadline.Do see it too, so that it tells a
			// ceiling, the shared deadline and a cancellation apart.
			<-actx.Done()
		}
		trailer := cs.Trailer()
		l.release()
		return nil, s.c.mark(err, trailer)
	}
	return r, nil
}

// runHedged runs a lazy server stream whose policy hedges, under
// [deadline.DoHedged]: while an attempt has had no first event for the
// hedge delay, another stream is opened beside it. Each attempt reads its
// first message into one of its own; the winner's is merged into m (nil
// when the caller asked for the headers). A losing attempt's stream is
// canceled as soon as it loses, and one that reached its first event after
// another had won is canceled when DoHedged discards it.
func (s *clientStream) runHedged(d deadline.Deadline, p deadline.Policy, f firstEvent, m proto.Message) (*streamAttempt, error) {
	h := *p.Hedge // the caller's stays as it is
	h.Discard = func(v any) {
		if r, ok := v.(*streamAttempt); ok && r != nil {
			r.lease.release()
		}
	}
	p.Hedge = &h
	f.hedged = true
	won, err := deadline.DoHedged(s.caller, d, p, func(actx context.Context, a deadline.AttemptInfo) (*streamAttempt, error) {
		var msg proto.Message
		if !f.header {
			msg = m.ProtoReflect().New().Interface()
		}
		r, err := s.attempt(actx, a, f, msg)
		if err != nil {
			return nil, err
		}
		r.msg = msg
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	if won.msg != nil && !won.eof {
		proto.Reset(m)
		proto.Merge(m, won.msg)
	}
	return won, nil
}

// replay sends the kept messages and CloseSend on a new attempt. io.EOF
// from SendMsg means the stream ended: its status comes from RecvMsg.
func replay(cs grpc.ClientStream, sent []any, closed bool) error {
	for _, m := range sent {
		if err := cs.SendMsg(m); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
	if closed {
		return cs.CloseSend()
	}
	return nil
}
