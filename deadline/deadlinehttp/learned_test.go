package deadlinehttp_test

import (
	"io"
	"math"
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

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// liveRecorder returns a learn.Recorder in live mode, estimating from 20
// samples on, refreshed every 10, and the admission.Learned on it.
func liveRecorder(t *testing.T) (*learn.Recorder, admission.Learned) {
	t.Helper()
	rec := &learn.Recorder{}
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 10 * time.Second, MinSamples: 20}, Every: 10})
	require.NoError(t, err)
	return rec, admission.Learned{Recorder: rec, Estimator: live, Threshold: 0.05}
}

// slow is a handler that answers 200 after d, or 504 when its context ends
// first; it counts its calls.
func slow(d time.Duration, calls *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-time.After(d):
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done():
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	})
}

// getBudget serves a GET of path with a budget header of ms milliseconds.
func getBudget(h http.Handler, path string, ms int) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set(deadlinehttp.DefaultHeader, strconv.Itoa(ms))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestHandlerLearnedAdmission checks the learned refusal on a route of a
// ServeMux: nothing changes until the route has enough samples; then a
// budget below what it needs is answered 504 with the marker and the
// reason, next not called, and nothing of what was learned in the answer.
func TestHandlerLearnedAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, l := liveRecorder(t)
		var calls atomic.Int32
		var last deadlinehttp.Admission
		h, err := deadlinehttp.NewHandler(slow(100*time.Millisecond, &calls), deadlinehttp.WithLearnedAdmission(l),
			deadlinehttp.WithAdmission(func(_ *http.Request, a deadlinehttp.Admission) { last = a }))
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("GET /items/{id}", h)

		w := getBudget(mux, "/items/1", 50)
		assert.Equal(t, http.StatusGatewayTimeout, w.Code, "no samples yet: admitted, and cut by its budget")
		assert.Empty(t, w.Header().Get(deadlinehttp.RefusedHeader))
		assert.Equal(t, int32(1), calls.Load())
		assert.False(t, last.Learned)

		for i := range 29 {
			require.Equal(t, http.StatusOK, getBudget(mux, "/items/"+strconv.Itoa(i), 1000).Code)
		}
		require.Equal(t, []string{"GET /items/{id}"}, rec.Steps(), "recorded under the pattern, not the path")

		w = getBudget(mux, "/items/7", 50)
		assert.Equal(t, http.StatusGatewayTimeout, w.Code)
		assert.Equal(t, "budget-ms=50, floor-ms=0, reason=learned", w.Header().Get(deadlinehttp.RefusedHeader))
		assert.Equal(t, "deadline budget too small: budget-ms=50, floor-ms=0, reason=learned\n", w.Body.String())
		assert.Equal(t, int32(30), calls.Load(), "next is not called")
		assert.Equal(t, deadlinehttp.RefusalLearned, last.Refusal)
		assert.True(t, last.Learned)
		assert.Zero(t, last.Estimate.P)
		assert.Equal(t, uint64(30), last.Estimate.Samples)

		w = getBudget(mux, "/items/7", 150)
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, deadlinehttp.RefusalNone, last.Refusal)
		assert.True(t, last.Learned)
		assert.InDelta(t, 1, last.Estimate.P, 1e-9, "the one cut at 50ms only says it took longer than 50ms (Kaplan–Meier)")
	})
}

// TestHandlerRoute checks that a middleware wrapping a whole mux learns
// nothing by default (the pattern is not known yet), and learns per
// pattern with WithRoute.
func TestHandlerRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		mux := http.NewServeMux()
		mux.Handle("GET /a", slow(time.Millisecond, &calls))

		rec, l := liveRecorder(t)
		h, err := deadlinehttp.NewHandler(mux, deadlinehttp.WithLearnedAdmission(l))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, getBudget(h, "/a", 100).Code)
		assert.Empty(t, rec.Steps(), "no route: not recorded")

		rec, l = liveRecorder(t)
		h, err = deadlinehttp.NewHandler(mux, deadlinehttp.WithLearnedAdmission(l),
			deadlinehttp.WithRoute(func(r *http.Request) string { _, p := mux.Handler(r); return p }))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, getBudget(h, "/a", 100).Code)
		assert.Equal(t, []string{"GET /a"}, rec.Steps())
	})
}

// TestHandlerAdmissionQueue checks the queue through the middleware: a
// request that waits until it can no longer finish gets 504 with the
// reason; one that finds the backlog full gets 503 without the marker; a
// slot freed is taken by the next request.
func TestHandlerAdmissionQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int32
		h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				<-release
			}
		}), deadlinehttp.WithAdmissionQueue(1, 1), deadlinehttp.WithFloor(10*time.Millisecond))
		require.NoError(t, err)

		var wg sync.WaitGroup
		var holder, waiter *httptest.ResponseRecorder
		wg.Go(func() { holder = getBudget(h, "/", 1000) })
		synctest.Wait()
		start := time.Now()
		var waited time.Duration
		var wgWaiter sync.WaitGroup
		wgWaiter.Go(func() {
			// It leaves before the queue has stood for LIFOAfter, after
			// which it would wait at most 2 × the floor.
			waiter = getBudget(h, "/", 105)
			waited = time.Since(start)
		})
		synctest.Wait()

		full := getBudget(h, "/", 1000)
		assert.Equal(t, http.StatusServiceUnavailable, full.Code)
		assert.Empty(t, full.Header().Get(deadlinehttp.RefusedHeader), "overload, not a budget too small")

		wgWaiter.Wait()
		assert.Equal(t, http.StatusGatewayTimeout, waiter.Code)
		assert.Equal(t, "budget-ms=105, floor-ms=10, reason=queue_timeout", waiter.Header().Get(deadlinehttp.RefusedHeader))
		assert.Equal(t, 95*time.Millisecond, waited, "it left when only the floor was left")
		assert.Equal(t, int32(1), calls.Load())

		close(release)
		wg.Wait()
		assert.Equal(t, http.StatusOK, holder.Code)
		assert.Equal(t, http.StatusOK, getBudget(h, "/", 1000).Code, "the slot was freed")
	})
}

func TestHandlerAdmissionErrors(t *testing.T) {
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	_, l := liveRecorder(t)
	bad := l
	bad.Threshold = math.NaN()
	for _, tt := range []struct {
		opt   deadlinehttp.HandlerOption
		field string
	}{
		{deadlinehttp.WithAdmissionQueue(0, 10), "deadlinehttp.WithAdmissionQueue limit"},
		{deadlinehttp.WithAdmissionQueue(-1, 10), "deadlinehttp.WithAdmissionQueue limit"},
		{deadlinehttp.WithAdmissionQueue(1, -1), "deadlinehttp.WithAdmissionQueue backlog"},
		{deadlinehttp.WithLearnedAdmission(bad), "admission.Learned.Threshold"},
		{deadlinehttp.WithLearnedAdmission(admission.Learned{Recorder: l.Recorder, Estimator: l.Estimator, Threshold: 1}), "admission.Learned.Threshold"},
		{deadlinehttp.WithLearnedAdmission(admission.Learned{Estimator: l.Estimator, Threshold: 0.05}), "admission.Learned.Recorder"},
	} {
		h, err := deadlinehttp.NewHandler(next, tt.opt)
		assert.Nil(t, h)
		var pe *deadline.PolicyError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, tt.field, pe.Field)
	}
	h, err := deadlinehttp.NewHandler(next, deadlinehttp.WithLearnedAdmission(l), deadlinehttp.WithAdmissionQueue(4, 0))
	require.NoError(t, err)
	assert.NotNil(t, h)
}

// TestHandlerPanicFreesQueueSlot: a panic in a WithAdmission function or in
// next (net/http recovers both) gives the request's queue slot back; with
// one slot, every later request would be answered 503 for good otherwise.
func TestHandlerPanicFreesQueueSlot(t *testing.T) {
	var observed atomic.Int32
	var panicNext atomic.Bool
	h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		if panicNext.Load() {
			panic("handler bug")
		}
	}), deadlinehttp.WithAdmissionQueue(1, 0),
		deadlinehttp.WithAdmission(func(*http.Request, deadlinehttp.Admission) {
			if observed.Add(1) == 1 {
				panic("telemetry bug")
			}
		}))
	require.NoError(t, err)

	require.PanicsWithValue(t, "telemetry bug", func() { getBudget(h, "/", 1000) })
	for i := range 3 {
		require.Equal(t, http.StatusOK, getBudget(h, "/", 1000).Code, "request %d after the WithAdmission panic: its slot was freed", i)
	}

	panicNext.Store(true)
	require.PanicsWithValue(t, "handler bug", func() { getBudget(h, "/", 1000) })
	panicNext.Store(false)
	require.Equal(t, http.StatusOK, getBudget(h, "/", 1000).Code, "after next's panic: its slot was freed")
}

// slowBody is a request body a client sends slowly: one byte a second.
type slowBody struct{ left int }

func (b *slowBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(time.Second)
	b.left--
	p[0] = 'x'
	return 1, nil
}

// TestHandlerSlowUploadsDoNotTeachSlowness: what a client controls (how
// fast its body arrives) is not the route's service time. After 30 uploads
// that take 3 s to arrive and 100 ms to handle, a request with a 300 ms
// budget and a quick body is admitted: the route needs 100 ms.
func TestHandlerSlowUploadsDoNotTeachSlowness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, l := liveRecorder(t)
		var last deadlinehttp.Admission
		h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-r.Context().Done():
				w.WriteHeader(http.StatusGatewayTimeout)
			}
		}), deadlinehttp.WithLearnedAdmission(l),
			deadlinehttp.WithAdmission(func(_ *http.Request, a deadlinehttp.Admission) { last = a }))
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("/upload", h)
		post := func(body io.Reader, ms int) int {
			req := httptest.NewRequest(http.MethodPost, "/upload", body)
			req.Header.Set(deadlinehttp.DefaultHeader, strconv.Itoa(ms))
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, req)
			return w.Code
		}

		for range 30 {
			require.Equal(t, http.StatusOK, post(&slowBody{left: 3}, 30000))
		}
		require.Equal(t, []string{"/upload"}, rec.Steps())

		assert.Equal(t, http.StatusOK, post(strings.NewReader("quick"), 300),
			"a 300 ms budget covers the 100 ms the route needs; the uploads' 3 s were the clients'")
		assert.True(t, last.Learned)
		assert.InDelta(t, 1, last.Estimate.P, 1e-9)
	})
}
