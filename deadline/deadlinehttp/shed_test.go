package deadlinehttp_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHandlerShedsFromAStandingQueue: a request that waited in a standing
// queue as long as it may is answered 503 with Deadline-Refused
// "reason=standing_queue" (shed: come back), where one that finds the
// backlog full is answered 503 without it (overload).
func TestHandlerShedsFromAStandingQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("id") == "hold" {
				<-release
			}
		}), deadlinehttp.WithAdmissionQueue(1, 1), deadlinehttp.WithFloor(10*time.Millisecond))
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Go(func() { getBudget(h, "/?id=hold", 5000) })
		synctest.Wait()
		shedc := make(chan *httptest.ResponseRecorder, 1)
		wg.Go(func() { shedc <- getBudget(h, "/", 1000) })
		synctest.Wait()
		full := getBudget(h, "/", 1000)
		assert.Equal(t, http.StatusServiceUnavailable, full.Code)
		assert.Empty(t, full.Header().Get(deadlinehttp.RefusedHeader), "the backlog was full: overload")

		time.Sleep(time.Second) // the queue stands; the waiter is shed
		var shed *httptest.ResponseRecorder
		select {
		case shed = <-shedc:
		default:
			require.FailNow(t, "still waiting after 1 s of a standing queue")
		}
		assert.Equal(t, http.StatusServiceUnavailable, shed.Code)
		assert.Equal(t, "budget-ms=1000, floor-ms=10, reason=standing_queue", shed.Header().Get(deadlinehttp.RefusedHeader))
		close(release)
		wg.Wait()
	})
}
