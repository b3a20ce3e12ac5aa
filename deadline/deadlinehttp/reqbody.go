package deadlinehttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// maxBodyChunk bounds the buffer a streamBody reads the stream into.
const maxBodyChunk = 32 << 10

// streamBody is the body of an attempt whose request body is a stream (it
// has no GetBody: a pipe, a file, the body of an inbound request a proxy
// forwards): the transport never replays it, and its producer can stall. A
// Read blocked on the stream ends when the attempt's lease does, with an
// error wrapping the lease's cause, so that the attempt, and RoundTrip,
// end too (net/http waits for its write of the body before it returns).
//
// The stream is read by a pump goroutine, one Read at a time, into a
// buffer of its own, and handed over; a Read waits for it or for the lease.
// When the lease ends during a read, the stream is closed under it, which
// makes a pipe, a file or a connection return at once, and the pump ends.
// A stream whose Close waits for its Read (net/http's server request body
// does) cannot be interrupted: its pump ends when the stream does (the
// client sends or goes away, or the server's ReadTimeout), the transport
// having returned long before. A body whose request has GetBody is taken
// to be in memory, as http.NewRequest makes it, and is sent as it is.
type streamBody struct {
	src      io.ReadCloser
	lease    context.Context
	closeSrc func() error // src.Close, once

	// Only the reader touches these (net/http reads a body from one
	// goroutine at a time).
	buf []byte
	err error // sticky: EOF, the stream's error, the lease's end, Close

	started atomic.Bool
	ask     chan []byte     // a buffer to fill, reader to pump
	got     chan readResult // what the pump read, pump to reader
	quit    chan struct{}   // closed by stop
	stop    func()
}

type readResult struct {
	n   int
	err error
}

func newStreamBody(src io.ReadCloser, lease context.Context) *streamBody {
	b := &streamBody{
		src: src, lease: lease, closeSrc: sync.OnceValue(src.Close),
		ask: make(chan []byte), got: make(chan readResult), quit: make(chan struct{}),
	}
	b.stop = sync.OnceFunc(func() { close(b.quit) })
	return b
}

func (b *streamBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !b.started.Load() {
		if b.lease.Err() != nil {
			return 0, b.end(false)
		}
		b.started.Store(true)
		go b.pump()
	}
	if n := min(len(p), maxBodyChunk); cap(b.buf) < n {
		b.buf = make([]byte, n)
	}
	buf := b.buf[:min(len(p), cap(b.buf))]
	select {
	case b.ask <- buf:
	case <-b.lease.Done():
		return 0, b.end(false)
	case <-b.quit:
		return 0, b.closed()
	}
	select {
	case r := <-b.got:
		n := copy(p, buf[:r.n])
		b.err = r.err
		return n, r.err
	case <-b.lease.Done():
		return 0, b.end(true)
	case <-b.quit: // closed during the read
		go b.closeSrc()
		return 0, b.closed()
	}
}

// end fails the body with the lease's cause. reading says the pump is in
// a Read of the stream: the stream is closed under it, from a goroutine of
// its own since its Close may wait for that Read.
func (b *streamBody) end(reading bool) error {
	b.err = fmt.Errorf("deadlinehttp: request body: the attempt's lease ended: %w", context.Cause(b.lease))
	b.stop()
	if reading {
		go b.closeSrc()
	}
	return b.err
}

func (b *streamBody) closed() error {
	b.err = http.ErrBodyReadAfterClose
	return b.err
}

// pump reads the stream for the reader until the stream ends or the body
// is stopped, then closes the stream.
func (b *streamBody) pump() {
	defer b.closeSrc()
	for {
		select {
		case buf := <-b.ask:
			n, err := b.src.Read(buf)
			select {
			case b.got <- readResult{n, err}:
			case <-b.quit:
				return
			}
			if err != nil {
				return
			}
		case <-b.quit:
			return
		}
	}
}

// Close stops the body and closes the stream: at once if it was never
// read, else as the pump ends.
func (b *streamBody) Close() error {
	b.stop()
	if !b.started.Load() {
		return b.closeSrc()
	}
	return nil
}
