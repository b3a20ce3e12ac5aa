package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"go.uber.org/goleak"
)

// mainEnv, set to 1 in a child process's environment, makes the test
// binary run the demo's main with the child's arguments: the tests of exit
// codes and of the process's streams run the demo as a person does, without
// a go build.
const mainEnv = "TRACEDEMO_TEST_RUN_MAIN"

// The providers, the HTTP transports and the exporters all start
// goroutines: every one must be gone when the tests end.
func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// executeInMemory is an executor that plays sc's plan in memory: the
// providers' real handlers (budget middleware and otelhttp server spans
// included) behind memTransport. Call it inside a synctest bubble, where
// every duration comes out exact.
func executeInMemory(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider) (outcome, error) {
	ps := newProviders(sc)
	mem := memTransport{handlers: map[string]http.Handler{}}
	urls := map[string]string{}
	for _, s := range agentPlan() {
		host := s.name + ".test"
		h, err := ps.byStep[s.name].handler(tp)
		if err != nil {
			return outcome{}, err
		}
		mem.handlers[host] = h
		urls[s.name] = "http://" + host
	}
	rec, stepErr := play(ctx, sc, seed, budget, tp, mp, mem, urls)
	return outcome{rec: rec, ps: ps, stepErr: stepErr}, nil
}

// memTransport delivers each request to the handler of its host in memory,
// on the caller's goroutine, so that a whole run fits in a synctest bubble
// where time is virtual and every duration is exact.
//
// A handler that aborts (panics with http.ErrAbortHandler, as a provider
// does when the budget it was given runs out) stands for a dropped
// connection. The providers only abort once their lease, which is never
// shorter than the client's, has ended, so memTransport then waits for the
// client's attempt context to end too and returns its error, as a real
// client whose lease ran out first would.
type memTransport struct {
	handlers map[string]http.Handler
}

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper always closes the request body (otelhttp records a
	// request's client metrics when it does).
	if req.Body != nil {
		defer req.Body.Close()
	}
	ctx := req.Context()
	h, ok := m.handlers[req.URL.Host]
	if !ok {
		return nil, &net404{host: req.URL.Host}
	}
	sreq := req.Clone(ctx)
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "192.0.2.1:40000"
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	if aborted := serve(h, rec, sreq); aborted {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// serve runs h and reports whether it aborted with http.ErrAbortHandler.
// Any other panic propagates.
func serve(h http.Handler, w http.ResponseWriter, r *http.Request) (aborted bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			aborted = true
		}
	}()
	h.ServeHTTP(w, r)
	_, _ = io.Copy(io.Discard, r.Body)
	return false
}

// net404 is the error for a host memTransport does not serve.
type net404 struct{ host string }

func (e *net404) Error() string { return "memTransport: no handler for host " + e.host }
