package opampextension

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
)

// boundedHijack hands opamp-go's WebSocket upgrade a connection whose
// reads are bounded per message: the Collector's max_request_body_size
// bounds a plain-HTTP body, and nothing would bound a WebSocket message
// (opamp-go reads each one whole, without a limit). It keeps the wrapped
// writer's Flush and, through Unwrap, http.ResponseController.
type boundedHijack struct {
	http.ResponseWriter
	limit int64
}

// Hijack hijacks the underlying connection and wraps it in a boundedConn.
func (b *boundedHijack) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(b.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &boundedConn{Conn: c, limit: b.limit + hijackSlack}, rw, nil
}

// Flush flushes the wrapped writer.
func (b *boundedHijack) Flush() { _ = http.NewResponseController(b.ResponseWriter).Flush() }

// Unwrap returns the wrapped writer, for http.ResponseController.
func (b *boundedHijack) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// hijackSlack is what the WebSocket reader may read ahead of a message
// (its buffer, frame headers) on top of the message's bound.
const hijackSlack = 64 << 10

// boundedConn fails a read once more than limit bytes were read since the
// last message was delivered: a peer cannot make the server buffer one
// message of any size.
type boundedConn struct {
	net.Conn
	limit int64
	read  atomic.Int64
}

// ErrMessageTooLarge ends a WebSocket whose message exceeds
// max_request_body_size.
var ErrMessageTooLarge = errors.New("deadlinebudget_opamp: a WebSocket message exceeds max_request_body_size")

func (b *boundedConn) Read(p []byte) (int, error) {
	if b.read.Load() > b.limit {
		return 0, ErrMessageTooLarge
	}
	n, err := b.Conn.Read(p)
	b.read.Add(int64(n))
	return n, err
}

// delivered starts the next message's bound.
func (b *boundedConn) delivered() { b.read.Store(0) }
