package agentrun

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
)

// The transport tells a model call what the provider's answer said.
func TestTransportClassifies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/429":
			w.Header().Set("Retry-After-Ms", "250")
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/503-no":
			w.Header().Set("X-Should-Retry", "false")
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/400":
			w.WriteHeader(http.StatusBadRequest)
		case "/azure":
			w.Header().Set("X-Ms-Retry-After-Ms", "40")
			w.WriteHeader(529)
		}
	}))
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	c := &http.Client{Transport: Transport(nil, nil)}
	base := errors.New("provider error")
	for path, want := range map[string]struct {
		retryable bool
		wait      time.Duration
	}{
		"/429": {true, 250 * time.Millisecond}, "/503-no": {false, 0}, "/400": {false, 0}, "/azure": {true, 40 * time.Millisecond},
	} {
		ctx, a := WithAnswer(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		got := a.Classify(base)
		assert.ErrorIs(t, got, base, path)
		assert.Equal(t, want.retryable, deadline.IsRetryable(got), path)
		wait, ok := deadline.RetryAfterOf(got)
		assert.Equal(t, want.wait != 0, ok, path)
		assert.Equal(t, want.wait, wait, path)
	}
	// No answer (a transport error, the lease): unchanged.
	assert.Equal(t, base, (&Answer{}).Classify(base))
}
