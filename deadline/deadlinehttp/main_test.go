package deadlinehttp_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// memTransport serves each request in memory with h, as a separate process
// would: the server side sees only what crosses the wire (method, URL,
// header, body bytes), in a context of its own that ends when the client's
// request context ends (as a closed connection would end it). It lets
// timing tests run inside a synctest bubble, where real sockets would not
// count as durably blocked.
type memTransport struct{ h http.Handler }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := context.AfterFunc(req.Context(), cancel)
	defer stop()
	sr := httptest.NewRequestWithContext(sctx, req.Method, req.URL.String(), bytes.NewReader(body))
	sr.Header = req.Header.Clone()
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, sr)
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

// seen is one request as a test server received it.
type seen struct {
	Method string
	Key    string // Idempotency-Key
	Budget string // the budget header
	Body   []byte
	At     time.Time
}

// reqLog records the requests a test server receives.
type reqLog struct {
	mu   sync.Mutex
	reqs []seen
}

// record stores r (reading its body) and returns its 1-based number.
func (l *reqLog) record(r *http.Request) int {
	body, _ := io.ReadAll(r.Body)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, seen{
		Method: r.Method, Key: r.Header.Get("Idempotency-Key"),
		Budget: r.Header.Get(deadlineBudgetHeader), Body: body, At: time.Now(),
	})
	return len(l.reqs)
}

func (l *reqLog) all() []seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seen(nil), l.reqs...)
}

const deadlineBudgetHeader = "Deadline-Budget-Ms"

// server is a loopback httptest server that records requests and tracks its
// connections through ConnState.
type server struct {
	*httptest.Server
	reqLog

	cmu    sync.Mutex
	opened int               // connections ever accepted
	open   map[net.Conn]bool // connections not yet closed or hijacked
	events chan struct{}     // one per connection state change
}

// newServer starts a loopback server whose handler gets each request's
// number (1-based, after its body is recorded).
func newServer(t *testing.T, h func(n int, w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{open: map[net.Conn]bool{}, events: make(chan struct{}, 1024)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(s.record(r), w, r)
	}))
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		s.cmu.Lock()
		switch st {
		case http.StateNew:
			s.opened++
			s.open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(s.open, c)
		}
		s.cmu.Unlock()
		select {
		case s.events <- struct{}{}:
		default:
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *server) conns() (opened, open int) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return s.opened, len(s.open)
}

// waitAllClosed waits until the server has no open connection. It fails
// the test if that does not happen within a generous guard.
func (s *server) waitAllClosed(t *testing.T) {
	t.Helper()
	guard := time.After(10 * time.Second)
	for {
		if _, open := s.conns(); open == 0 {
			return
		}
		select {
		case <-s.events:
		case <-guard:
			_, open := s.conns()
			t.Fatalf("%d connections still open", open)
		}
	}
}

// hijackReset closes the request's connection with an RST, without a
// response.
func hijackReset(t *testing.T, w http.ResponseWriter) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// recorder keeps what the hooks saw.
type recorder struct {
	mu       sync.Mutex
	attempts []deadline.AttemptInfo
	results  []deadline.AttemptResult
	backoffs []deadline.BackoffInfo
	calls    []deadline.CallInfo
	ends     []deadline.CallResult
}

func (r *recorder) hooks() *deadline.Hooks {
	return &deadline.Hooks{
		CallStart: func(ctx context.Context, c deadline.CallInfo) context.Context {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.calls = append(r.calls, c)
			return nil
		},
		AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.attempts = append(r.attempts, a)
			return nil
		},
		AttemptEnd: func(ctx context.Context, a deadline.AttemptInfo, res deadline.AttemptResult) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.results = append(r.results, res)
		},
		Backoff: func(ctx context.Context, b deadline.BackoffInfo) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.backoffs = append(r.backoffs, b)
		},
		CallEnd: func(ctx context.Context, c deadline.CallResult) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.ends = append(r.ends, c)
		},
	}
}

// fastPolicy is the default policy with a short, unjittered backoff, so
// that loopback tests spend little wall time.
func fastPolicy(attempts int) deadline.Policy {
	p := deadline.DefaultPolicy()
	p.MaxAttempts = attempts
	p.Backoff = deadline.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond, Jitter: deadline.JitterNone}
	return p
}

// budgetCtx returns a context carrying a fresh Deadline of budget.
func budgetCtx(budget time.Duration) context.Context {
	return deadline.NewContext(context.Background(), deadline.New(budget))
}

// budgetCtxMade is budgetCtx, and the instant its Deadline was made (its
// end less its budget, with the same monotonic reading): the only instant
// from which a lower bound on a lease's duration holds on a loaded machine.
func budgetCtxMade(budget time.Duration) (context.Context, time.Time) {
	d := deadline.New(budget)
	return deadline.NewContext(context.Background(), d), d.End().Add(-d.Budget())
}
