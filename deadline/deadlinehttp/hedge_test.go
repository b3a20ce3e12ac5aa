package deadlinehttp_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowBase answers 200 after 50ms, counting the requests in flight.
type slowBase struct{ now, most, sent atomic.Int32 }

func (b *slowBase) RoundTrip(r *http.Request) (*http.Response, error) {
	b.sent.Add(1)
	n := b.now.Add(1)
	defer b.now.Add(-1)
	if n > b.most.Load() {
		b.most.Store(n)
	}
	select {
	case <-time.After(50 * time.Millisecond):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// TestTransportDoesNotHedge: a policy asking for hedges is sent one attempt
// at a time: the transport's attempts share the call's state.
func TestTransportDoesNotHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{}
		p := deadline.Policy{MaxAttempts: 3, Hedge: &deadline.Hedge{Delay: time.Millisecond, MaxHedges: 2}}
		tr := deadlinehttp.NewTransport(base, deadlinehttp.WithPolicy(p))
		req, err := http.NewRequestWithContext(deadline.NewContext(t.Context(), deadline.New(time.Second)), http.MethodGet, "http://example.invalid/", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.EqualValues(t, 1, base.most.Load())
		assert.EqualValues(t, 1, base.sent.Load())
	})
}
