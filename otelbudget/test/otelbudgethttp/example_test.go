package otelbudgethttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// A server that is busy once: the trace has the call span and one CLIENT
// span per physical request, the resend carrying http.request.resend_count.
func Example_newTransport() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))
	p := deadline.DefaultPolicy()
	p.Name = "fetch"

	// The one line: budget, retries, spans and metrics for every request.
	client := &http.Client{Transport: otelbudgethttp.NewTransport(http.DefaultTransport, obs, deadlinehttp.WithPolicy(p))}
	defer client.CloseIdleConnections()

	ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))

	for _, s := range rec.Ended() {
		fmt.Printf("%s (%s)", s.Name(), s.SpanKind())
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case otelbudget.AttrAttemptNumber, otelbudget.AttrAttemptEndedBy, semconv.HTTPRequestResendCountKey,
				semconv.HTTPResponseStatusCodeKey, otelbudget.AttrVerdict, otelbudget.AttrAttempts:
				fmt.Printf(" %s=%s", kv.Key, kv.Value.String())
			}
		}
		fmt.Println()
	}
	// Output:
	// ok
	// HTTP GET (client) deadline.attempt.number=1 http.response.status_code=503 deadline.attempt.ended_by=error
	// fetch (internal) deadline.attempts=2 deadline.verdict=ok
	// HTTP GET (client) deadline.attempt.number=2 http.request.resend_count=1 http.response.status_code=200 deadline.attempt.ended_by=completed
}
