package deadlinehttp_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// guard bounds how long past its lease a loopback call may take before a
// test gives up on it: far more than the work needs, so that a loaded
// machine does not fail the test; a call blocked without bound still does.
const guard = 2 * time.Second

// TestStalledBodyEndsWithLease: a PUT whose body is a pipe nobody writes to
// (a stalled producer) returns when its lease ends, with an error matching
// context.DeadlineExceeded; the pipe's reader is closed, and no goroutine
// is left behind.
func TestStalledBodyEndsWithLease(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {})
	tr := deadlinehttp.NewTransport(s.Client().Transport, deadlinehttp.WithPolicy(fastPolicy(3)))
	pr, pw := io.Pipe()
	const budget = 300 * time.Millisecond
	lease := budget - fastPolicy(3).Floor
	// The lease is measured from the instant the deadline was made, not
	// from a clock read after it: under load, time passes between the two,
	// and a later start made the call look shorter than its lease
	// ("278.24ms is not >= 280ms" at load average 5.7).
	ctx, start := budgetCtxMade(budget)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.URL, pr)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(lease + guard):
		pw.Close() // unblock it, to end the test cleanly
		<-done
		t.Fatalf("RoundTrip still blocked %v after its %v lease", guard, lease)
	}
	took := time.Since(start)
	t.Logf("returned %v after the deadline was made, its lease %v", took, lease)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "%v", err)
	assert.True(t, stop.Reason.Budget(), "%v", stop.Reason)
	assert.GreaterOrEqual(t, took, lease, "a lease ends no earlier than its deadline's start plus the lease")

	tr.CloseIdleConnections()
	s.Close()
	goleak.VerifyNone(t)
	_, werr := pw.Write([]byte("late"))
	assert.ErrorIs(t, werr, io.ErrClosedPipe, "the stalled body's reader was closed")
}

// TestProxyForwardingStalledClient: a proxy (NewHandler in front of a
// handler that forwards r.Body through a Transport) whose client sends half
// its body and stalls: the forwarding call returns when its lease ends,
// with an error matching context.DeadlineExceeded, and (the proxy having
// enabled full duplex, so that it can answer before the body is read) the
// client gets the proxy's answer in that bound too.
//
// Without WithBodyReadDeadline, the inbound body's Read cannot be
// interrupted (net/http's server body Close waits for it): the goroutine
// reading it for the transport ends when the client goes away, which the
// test then checks (TestBodyReadDeadlineEndsStalledRead is the same proxy
// with the option).
func TestProxyForwardingStalledClient(t *testing.T) {
	backend := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {})
	toBackend := deadlinehttp.NewTransport(backend.Client().Transport, deadlinehttp.WithPolicy(fastPolicy(3)))
	type result struct {
		took time.Duration
		err  error
	}
	forwarded := make(chan result, 1)
	proxy := httptest.NewServer(mustHandler(deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		out, err := http.NewRequestWithContext(r.Context(), http.MethodPut, backend.URL, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out.ContentLength = r.ContentLength
		start := time.Now()
		resp, err := toBackend.RoundTrip(out)
		forwarded <- result{time.Since(start), err}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}), deadlinehttp.WithMaxBudget(time.Minute))))

	const budget = 300 * time.Millisecond
	lease := budget - fastPolicy(3).Floor
	conn, err := net.Dial("tcp", proxy.Listener.Addr().String())
	require.NoError(t, err)
	start := time.Now()
	_, err = io.WriteString(conn, "PUT /upload HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 1000\r\n"+
		deadlinehttp.DefaultHeader+": 300\r\n\r\n"+strings.Repeat("h", 500))
	require.NoError(t, err)

	select {
	case res := <-forwarded:
		t.Logf("forwarding returned after %v, its lease %v", res.took, lease)
		require.Error(t, res.err)
		assert.ErrorIs(t, res.err, context.DeadlineExceeded)
	case <-time.After(lease + guard):
		conn.Close()
		t.Fatalf("the forwarding RoundTrip still blocked %v after its %v lease", guard, lease)
	}
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(guard)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "the stalled client got no answer")
	t.Logf("the client had the proxy's answer %v after it started", time.Since(start))
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	resp.Body.Close()

	conn.Close() // the client goes away: the inbound body's Read returns
	proxy.Close()
	toBackend.CloseIdleConnections()
	backend.Close()
	goleak.VerifyNone(t)
}

// TestStreamBodyDelivered: a streamed body (a pipe its producer writes in
// uneven chunks) still arrives whole and byte-identical through the lease's
// watch, and the producer sees its reader closed once the body is sent.
func TestStreamBodyDelivered(t *testing.T) {
	payload := make([]byte, 200<<10)
	rand.Read(payload)
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {})
	tr := deadlinehttp.NewTransport(s.Client().Transport)
	defer tr.CloseIdleConnections()
	pr, pw := io.Pipe()
	go func() {
		rest := payload
		for i := 1; len(rest) > 0; i++ {
			n := min(len(rest), 1+(i*7919)%(48<<10))
			if _, err := pw.Write(rest[:n]); err != nil {
				pw.CloseWithError(err)
				return
			}
			rest = rest[n:]
		}
		pw.Close()
	}()
	req, err := http.NewRequestWithContext(budgetCtx(10*time.Second), http.MethodPut, s.URL, pr)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	got := s.all()
	require.Len(t, got, 1)
	assert.True(t, bytes.Equal(payload, got[0].Body), "received %d bytes of %d", len(got[0].Body), len(payload))
}

// TestBodyReadDeadlineEndsStalledRead: the proxy of
// TestProxyForwardingStalledClient with WithBodyReadDeadline: the inbound
// body's Read fails when the budget ends, so nothing is left reading it
// while the client, still connected, stalls.
func TestBodyReadDeadlineEndsStalledRead(t *testing.T) {
	backend := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {})
	toBackend := deadlinehttp.NewTransport(backend.Client().Transport, deadlinehttp.WithPolicy(fastPolicy(3)))
	handlerDone := make(chan error, 1)
	proxy := httptest.NewServer(mustHandler(deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := http.NewRequestWithContext(r.Context(), http.MethodPut, backend.URL, r.Body)
		if err != nil {
			handlerDone <- err
			return
		}
		out.ContentLength = r.ContentLength
		resp, err := toBackend.RoundTrip(out)
		if err == nil {
			resp.Body.Close()
		}
		handlerDone <- err
	}), deadlinehttp.WithMaxBudget(time.Minute), deadlinehttp.WithBodyReadDeadline())))

	const budget = 300 * time.Millisecond
	conn, err := net.Dial("tcp", proxy.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "PUT /upload HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 1000\r\n"+
		deadlinehttp.DefaultHeader+": 300\r\n\r\n"+strings.Repeat("h", 500))
	require.NoError(t, err)
	select {
	case err := <-handlerDone:
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(budget + guard):
		t.Fatalf("the forwarding handler still blocked %v after its %v budget", guard, budget)
	}

	// The client is still connected and silent: with the read deadline,
	// the goroutines that read the inbound body for the transport (its pump,
	// and the one closing it) have returned.
	assert.NoError(t, waitNoStreamBodyGoroutine(budget+guard), "a goroutine still reads the stalled inbound body")
	conn.Close()
	proxy.Close()
	toBackend.CloseIdleConnections()
	backend.Close()
	goleak.VerifyNone(t)
}

// waitNoStreamBodyGoroutine waits, at most within, until no goroutine runs
// a streamed request body's pump or close.
func waitNoStreamBodyGoroutine(within time.Duration) error {
	stop := time.Now().Add(within)
	buf := make([]byte, 1<<20)
	for {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "deadlinehttp.(*streamBody).pump") && !strings.Contains(stacks, "deadlinehttp.(*streamBody).closeSrc") {
			return nil
		}
		if time.Now().After(stop) {
			return fmt.Errorf("after %v:\n%s", within, stacks)
		}
		<-time.After(10 * time.Millisecond)
	}
}

// TestBodyReadDeadlineKeepsConnectionsAlive: the read deadline of
// WithBodyReadDeadline is the request's own: a keep-alive connection whose
// first request (with a body) had a short budget serves a second request
// after that budget has passed.
func TestBodyReadDeadlineKeepsConnectionsAlive(t *testing.T) {
	s := httptest.NewServer(mustHandler(deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}), deadlinehttp.WithMaxBudget(time.Minute), deadlinehttp.WithBodyReadDeadline())))
	defer s.Close()
	client := s.Client()
	send := func(budgetMs string) (reused bool) {
		req, err := http.NewRequest(http.MethodPut, s.URL, strings.NewReader(strings.Repeat("b", 4096)))
		require.NoError(t, err)
		req.Header.Set(deadlinehttp.DefaultHeader, budgetMs)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return reused
	}
	send("100")
	<-time.After(300 * time.Millisecond) // well past the first request's read deadline
	assert.True(t, send("100"), "the second request did not reuse the connection")
	client.CloseIdleConnections()
}
