package budgetprop_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
)

// Three services on loopback: A sends with this library's transport; B
// has only otelhttp and the composite propagator, waits 200 ms and calls
// C; C reads the budget with the propagator (and, on the same request,
// with deadlinehttp.NewHandler). C's budget is A's lease minus B's time:
// B forwarded what was really left, not what it received.
func TestThreeHopsThroughAPassThroughService(t *testing.T) {
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}, newProp(t))

	// What the handlers saw, read after A's call returned (the race
	// detector does not see the order a network round trip gives).
	var mu sync.Mutex
	var atC budgetprop.Extraction
	var admC deadlinehttp.Admission
	cInner, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		atC, _ = budgetprop.FromContext(r.Context())
		mu.Unlock()
		io.WriteString(w, "c")
	}), deadlinehttp.WithAdmission(func(_ *http.Request, a deadlinehttp.Admission) {
		mu.Lock()
		admC = a
		mu.Unlock()
	}))
	require.NoError(t, err)
	srvC := httptest.NewServer(otelhttp.NewHandler(cInner, "C", otelhttp.WithPropagators(prop)))
	defer srvC.Close()

	// B: no code of this project beyond the propagator in its composite.
	toC := &http.Client{Transport: otelhttp.NewTransport(srvC.Client().Transport, otelhttp.WithPropagators(prop))}
	var atB budgetprop.Extraction
	var before, after time.Duration // what B had left around its call to C
	srvB := httptest.NewServer(otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		mu.Lock()
		atB, _ = budgetprop.FromContext(ctx)
		mu.Unlock()
		d, _ := deadline.FromContext(ctx)
		select { // B's own work
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srvC.URL, nil)
		b := d.Remaining()
		resp, err := toC.Do(req)
		a := d.Remaining()
		mu.Lock()
		before, after = b, a
		mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	}), "B", otelhttp.WithPropagators(prop)))
	defer srvB.Close()

	// A: this library's transport, one run of 2 s.
	client := &http.Client{Transport: deadlinehttp.NewTransport(srvB.Client().Transport)}
	ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srvB.URL, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	mu.Lock()
	defer mu.Unlock()

	// B got A's lease (the deadlinehttp header alone: a direct hop).
	require.True(t, atB.HasSentBudget)
	assert.False(t, atB.HasExpiry)
	assert.Equal(t, atB.SentBudget, atB.Admission.Budget)
	lease := atB.SentBudget
	assert.LessOrEqual(t, lease, 2*time.Second)

	// C got what B had left when it sent, rounded up to the millisecond:
	// A's lease minus B's time (its 200 ms wait and the rest), not A's lease.
	require.True(t, atC.HasSentBudget)
	require.True(t, atC.HasExpiry)
	assert.GreaterOrEqual(t, atC.SentBudget, after)
	assert.LessOrEqual(t, atC.SentBudget, before+time.Millisecond)
	assert.LessOrEqual(t, atC.SentBudget, lease-200*time.Millisecond)
	assert.Equal(t, atC.SentBudget, atC.Admission.Budget, "a direct hop: the relative budget, exact")

	// deadlinehttp.NewHandler, on the same request, read the same budget.
	assert.True(t, admC.HeaderValid)
	assert.Equal(t, atC.SentBudget, admC.HeaderBudget)
}
