package deadlinehttp

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// clientIO times what a request spends blocked on its client rather than
// on its work: reading the body the client sends (a slow upload) and
// writing the answer it reads (a slow reader). That time is taken out of
// what learned admission records and what the adaptive limit learns
// ([admission.Ticket.Exclude]): what one client controls must not teach
// the server that a route is slow, or every other client would be refused.
// One allocation holds the body, the writer and the count.
type clientIO struct {
	body   clientBody
	w      clientWriter
	waited atomic.Int64 // nanoseconds
}

// wait returns the time spent blocked on the client so far.
func (c *clientIO) wait() time.Duration { return time.Duration(c.waited.Load()) }

func (c *clientIO) since(start time.Time) { c.waited.Add(int64(time.Since(start))) }

// clientBody is an inbound request body that adds up the time its Reads
// wait.
type clientBody struct {
	io.ReadCloser
	c *clientIO
}

func (b *clientBody) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := b.ReadCloser.Read(p)
	b.c.since(start)
	return n, err
}

// clientWriter is next's ResponseWriter, adding up the time its writes
// block. It keeps what the ResponseWriter it wraps offers:
// http.ResponseController reaches the original through Unwrap (read and
// write deadlines, full duplex), and http.Flusher, http.Hijacker and
// io.ReaderFrom are passed on (through http.ResponseController when the
// original lacks one: Hijack then returns its error, Flush does nothing).
type clientWriter struct {
	http.ResponseWriter
	c *clientIO
}

func (w *clientWriter) Write(p []byte) (int, error) {
	start := time.Now()
	n, err := w.ResponseWriter.Write(p)
	w.c.since(start)
	return n, err
}

// ReadFrom passes r on to the original's ReadFrom (net/http's sends a file
// with sendfile). Only the time not spent reading r counts as the client's:
// a file is read as part of the work; from any other reader the reads are
// timed and taken out.
func (w *clientWriter) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(writerOnly{w}, r) // through Write, timed there
	}
	start := time.Now()
	if _, file := r.(*os.File); file {
		n, err := rf.ReadFrom(r)
		w.c.since(start)
		return n, err
	}
	tr := &timedReader{r: r}
	n, err := rf.ReadFrom(tr)
	w.c.waited.Add(int64(time.Since(start) - tr.d))
	return n, err
}

// Flush sends what is buffered, timed like a write.
func (w *clientWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush with its error, as http.ResponseController asks.
func (w *clientWriter) FlushError() error {
	start := time.Now()
	err := http.NewResponseController(w.ResponseWriter).Flush()
	w.c.since(start)
	return err
}

// Hijack hands the connection over; nothing is timed after it.
func (w *clientWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap returns the original ResponseWriter, for http.ResponseController.
func (w *clientWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writerOnly hides ReadFrom, so that io.Copy writes through Write.
type writerOnly struct{ io.Writer }

// timedReader adds up the time its Reads take.
type timedReader struct {
	r io.Reader
	d time.Duration
}

func (t *timedReader) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := t.r.Read(p)
	t.d += time.Since(start)
	return n, err
}
