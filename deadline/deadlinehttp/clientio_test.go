package deadlinehttp_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// slowReader is a ResponseWriter whose client reads slowly: every Write
// blocks for d.
type slowReader struct {
	*httptest.ResponseRecorder
	d time.Duration
}

func (w slowReader) Write(p []byte) (int, error) {
	time.Sleep(w.d)
	return w.ResponseRecorder.Write(p)
}

// upload is a request body that arrives in n pieces, d apart.
type upload struct {
	n int
	d time.Duration
}

func (b *upload) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.d)
	b.n--
	p[0] = 'x'
	return 1, nil
}

// work is a handler that reads its body, works 5 ms and answers in four
// writes.
var work = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	time.Sleep(5 * time.Millisecond)
	for range 4 {
		if _, err := w.Write([]byte("answer")); err != nil {
			return
		}
	}
})

// TestHandlerSlowClientsDoNotLowerTheLimit: 16 clients uploading over
// 200 ms, or reading their answer over 200 ms, on a route whose work takes
// 5 ms, do not lower the adaptive admission limit below 90 % of where
// normal requests put it, and fewer than 15 % of the normal requests are
// refused. The limit rises instead (12 → 44 here): the slow clients hold
// their slots while they crawl, as they must (a slot bounds what the
// server holds; released during client I/O, slow clients would pile up
// unbounded), and the limit grows to serve the others beside them; the
// refusals come while it grows. Before, slow uploads dropped it from 48 to
// 4 and 147 of 175 small uploads got 503 on an idle server.
func TestHandlerSlowClientsDoNotLowerTheLimit(t *testing.T) {
	for _, slowClient := range []string{"uploads", "readers"} {
		t.Run(slowClient, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, err := overload.NewLimiter(overload.WithArrivalOrder())
				require.NoError(t, err)
				h, err := deadlinehttp.NewHandler(work, deadlinehttp.WithAdmissionLimiter(l))
				require.NoError(t, err)
				mux := http.NewServeMux()
				mux.Handle("POST /upload", h)
				var refused, served atomic.Int64
				var wg sync.WaitGroup
				serve := func(slow bool) {
					var body io.Reader = strings.NewReader("x")
					if slow && slowClient == "uploads" {
						body = &upload{n: 4, d: 50 * time.Millisecond}
					}
					req := httptest.NewRequest(http.MethodPost, "/upload", body)
					req.Header.Set(deadlinehttp.DefaultHeader, "1000")
					rec := httptest.NewRecorder()
					var w http.ResponseWriter = rec
					if slow && slowClient == "readers" {
						w = slowReader{rec, 50 * time.Millisecond}
					}
					mux.ServeHTTP(w, req)
					if !slow {
						if rec.Code == http.StatusOK {
							served.Add(1)
						} else {
							refused.Add(1)
						}
					}
				}
				normal := func(d time.Duration) {
					for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
						wg.Go(func() { serve(false) })
					}
				}
				normal(2 * time.Second)
				before := l.Limit()
				stop := make(chan struct{})
				for range 16 {
					wg.Go(func() {
						for {
							select {
							case <-stop:
								return
							default:
								serve(true)
							}
						}
					})
				}
				served.Store(0)
				normal(3 * time.Second)
				close(stop)
				wg.Wait()
				t.Logf("slow %s: limit %d before, %d after; normal requests %d served, %d refused", slowClient, before, l.Limit(), served.Load(), refused.Load())
				assert.GreaterOrEqual(t, float64(l.Limit()), 0.9*float64(before), "the limit did not fall")
				// The slow clients hold slots while they arrive: until the
				// limit grows for them, some normal requests find the
				// backlog full.
				assert.Less(t, float64(refused.Load()), 0.15*float64(served.Load()+refused.Load()))
			})
		})
	}
}

// TestHandlerSlowReadersDoNotTeachSlowness: answers written to clients
// that read them slowly (200 ms each) are not the route's service time:
// after 40 of them, a request with a 100 ms budget on a route whose work
// takes 5 ms is admitted. Before, the writes' time was learned, and
// learned admission refused the normal requests.
func TestHandlerSlowReadersDoNotTeachSlowness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := liveRecorder(t)
		h, err := deadlinehttp.NewHandler(work, deadlinehttp.WithLearnedAdmission(l))
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("/get", h)
		get := func(w http.ResponseWriter, ms int) {
			req := httptest.NewRequest(http.MethodGet, "/get", nil)
			req.Header.Set(deadlinehttp.DefaultHeader, strconv.Itoa(ms))
			mux.ServeHTTP(w, req)
		}
		for range 40 {
			get(slowReader{httptest.NewRecorder(), 50 * time.Millisecond}, 30000)
		}
		for range 20 {
			rec := httptest.NewRecorder()
			get(rec, 100)
			assert.Equal(t, http.StatusOK, rec.Code, "the route needs 5 ms; the 200 ms were the clients'")
		}
	})
}

// TestHandlerPerRouteByDefault: with an adaptive admission limit and no
// learned admission, a 2 ms and a 100 ms route registered on a ServeMux
// keep their latencies apart (r.Pattern), so the limit does not fall and
// the fast route is not refused. Before, they shared one baseline.
func TestHandlerPerRouteByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := overload.NewLimiter(overload.WithArrivalOrder())
		require.NoError(t, err)
		sleep := func(d time.Duration) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(d) })
		}
		fast, err := deadlinehttp.NewHandler(sleep(2*time.Millisecond), deadlinehttp.WithAdmissionLimiter(l))
		require.NoError(t, err)
		slowH, err := deadlinehttp.NewHandler(sleep(100*time.Millisecond), deadlinehttp.WithAdmissionLimiter(l))
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("GET /fast", fast)
		mux.Handle("GET /slow", slowH)
		var codes [600]atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for end := start.Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			ramp := time.Since(start) < 2*time.Second // from a limit of 20 to 200
			for _, path := range []string{"/fast", "/slow", "/slow"} {
				wg.Go(func() {
					if code := getBudget(mux, path, 1000).Code; !ramp {
						codes[code].Add(1)
					}
				})
			}
		}
		wg.Wait()
		t.Logf("limit %d; after the first 2 s: %d × 200, %d × 503, %d × 504", l.Limit(), codes[200].Load(), codes[503].Load(), codes[504].Load())
		assert.GreaterOrEqual(t, l.Limit(), 200, "two 100 ms calls a millisecond and one of 2 ms keep over 200 in flight")
		assert.Less(t, float64(codes[503].Load()), 0.01*float64(codes[200].Load()+codes[503].Load()), "after the ramp")
	})
}

// hijackable is a ResponseWriter that can be hijacked and read from.
type hijackable struct {
	*httptest.ResponseRecorder
	hijacked, readFrom, deadline bool
}

func (h *hijackable) SetWriteDeadline(time.Time) error {
	h.deadline = true
	return nil
}

func (h *hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.hijacked = true
	return nil, nil, nil
}

func (h *hijackable) ReadFrom(r io.Reader) (int64, error) {
	h.readFrom = true
	return io.Copy(h.ResponseRecorder, r)
}

// TestHandlerWriterKeepsInterfaces: the ResponseWriter next gets when the
// middleware times the client keeps Flusher, Hijacker, ReaderFrom and the
// ResponseController's way to the original.
func TestHandlerWriterKeepsInterfaces(t *testing.T) {
	l, err := overload.NewLimiter(overload.WithArrivalOrder())
	require.NoError(t, err)
	var checked bool
	h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checked = true
		_, ok := w.(http.Flusher)
		assert.True(t, ok, "Flusher")
		rf, ok := w.(io.ReaderFrom)
		require.True(t, ok, "ReaderFrom")
		n, err := rf.ReadFrom(strings.NewReader("body"))
		assert.NoError(t, err)
		assert.EqualValues(t, 4, n)
		assert.NoError(t, http.NewResponseController(w).SetWriteDeadline(time.Time{}), "through Unwrap")
		hj, ok := w.(http.Hijacker)
		require.True(t, ok, "Hijacker")
		_, _, err = hj.Hijack()
		assert.NoError(t, err)
	}), deadlinehttp.WithAdmissionLimiter(l))
	require.NoError(t, err)
	w := &hijackable{ResponseRecorder: httptest.NewRecorder()}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	require.True(t, checked)
	assert.True(t, w.hijacked)
	assert.True(t, w.readFrom)
	assert.True(t, w.deadline)
	assert.Equal(t, "body", w.Body.String())

	// An original without Hijack: the error says so.
	h2, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, err := w.(http.Hijacker).Hijack()
		assert.True(t, errors.Is(err, http.ErrNotSupported))
	}), deadlinehttp.WithAdmissionLimiter(l))
	require.NoError(t, err)
	h2.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
}
