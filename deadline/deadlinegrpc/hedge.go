package deadlinegrpc

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/deadlinebudget/budget/deadline"
)

// hedgedUnary runs a unary RPC whose policy hedges, under
// [deadline.DoHedged]: while an attempt has had no answer for the hedge
// delay, the same request is sent again beside it, each attempt in its own
// lease and counted against MaxAttempts. Attempts run at once, so each has
// a reply, headers, trailer and peer of its own; the winner's are copied
// into the caller's (the reply with proto.Merge after proto.Reset), and the
// losers' contexts are canceled ([deadline.ErrHedgeLost]), which cancels
// their RPCs. On a stop the caller's headers, trailer and peer are those of
// the last attempt that ended.
func (c *Client) hedgedUnary(ctx context.Context, d deadline.Deadline, p deadline.Policy, method string, req any, reply proto.Message, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, commit bool, opts []grpc.CallOption) error {
	out := outputsOf(opts)
	var (
		mu   sync.Mutex
		last *hedgedAttempt
	)
	won, err := deadline.DoHedged(ctx, d, p, func(actx context.Context, a deadline.AttemptInfo) (*hedgedAttempt, error) {
		h := &hedgedAttempt{reply: reply.ProtoReflect().New().Interface()}
		err := invoker(actx, method, req, h.reply, cc, h.options(opts, commit)...)
		if context.Cause(actx) != deadline.ErrHedgeLost {
			mu.Lock()
			last = h
			mu.Unlock()
		}
		return h, c.mark(err, h.trailer)
	})
	if err != nil {
		mu.Lock()
		if last != nil {
			last.deliver(out)
		}
		mu.Unlock()
		return wrapError(err)
	}
	proto.Reset(reply)
	proto.Merge(reply, won.reply)
	won.deliver(out)
	return nil
}

// hedgedAttempt is what one attempt of a hedged unary RPC received.
type hedgedAttempt struct {
	reply   proto.Message
	header  metadata.MD
	trailer metadata.MD
	peer    peer.Peer
}

// options returns the caller's call options with those that receive
// something (grpc.Header, grpc.Trailer, grpc.Peer) replaced by the
// attempt's own, so that attempts running at once never write the same
// variable.
func (h *hedgedAttempt) options(opts []grpc.CallOption, commit bool) []grpc.CallOption {
	all := make([]grpc.CallOption, 0, len(opts)+4)
	for _, o := range opts {
		switch o.(type) {
		case grpc.HeaderCallOption, grpc.TrailerCallOption, grpc.PeerCallOption:
			continue
		}
		all = append(all, o)
	}
	if commit {
		all = append(all, commitAtFirstSend)
	}
	return append(all, grpc.Header(&h.header), grpc.Trailer(&h.trailer), grpc.Peer(&h.peer))
}

// outputs are the caller's variables that call options fill.
type outputs struct {
	headers  []*metadata.MD
	trailers []*metadata.MD
	peers    []*peer.Peer
}

func outputsOf(opts []grpc.CallOption) outputs {
	var out outputs
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			out.headers = append(out.headers, o.HeaderAddr)
		case grpc.TrailerCallOption:
			out.trailers = append(out.trailers, o.TrailerAddr)
		case grpc.PeerCallOption:
			out.peers = append(out.peers, o.PeerAddr)
		}
	}
	return out
}

// deliver writes what the attempt received into the caller's variables.
func (h *hedgedAttempt) deliver(out outputs) {
	for _, p := range out.headers {
		*p = h.header
	}
	for _, p := range out.trailers {
		*p = h.trailer
	}
	for _, p := range out.peers {
		*p = h.peer
	}
}
