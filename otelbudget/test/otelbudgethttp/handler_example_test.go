package otelbudgethttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// A server with a 2 s maximum and a 20 ms floor: the SERVER span of each
// request says what budget it came with, what it got, and why a request
// was refused.
func Example_newHandler() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))

	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	h, err := otelbudgethttp.NewHandler(api, "api", obs,
		deadlinehttp.WithMaxBudget(2*time.Second), deadlinehttp.WithFloor(20*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan struct{}, 1) // the SERVER span has ended
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	for _, budget := range []string{"800", "60000", "5"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set(deadlinehttp.DefaultHeader, budget)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		<-done
	}
	http.DefaultClient.CloseIdleConnections()

	show := []attribute.Key{
		otelbudget.AttrServerInboundBudgetMs, otelbudget.AttrServerBudgetMs, otelbudget.AttrServerLimitedBy,
		otelbudget.AttrServerRefusal, otelbudget.AttrServerEndedBy,
	}
	for _, s := range rec.Ended() {
		// The span's name is otelhttp's choice and differs between the
		// otelhttp versions supported (the operation, or the method), so
		// print only its kind.
		fmt.Printf("%s span", s.SpanKind())
		for _, k := range show {
			for _, kv := range s.Attributes() {
				if kv.Key == k {
					fmt.Printf(" %s=%s", k, kv.Value.String())
				}
			}
		}
		fmt.Printf(" status=%s %q\n", s.Status().Code, s.Status().Description)
	}
	// Output:
	// server span deadline.server.inbound_budget_ms=800 deadline.server.budget_ms=800 deadline.server.limited_by=header deadline.server.ended_by=completed status=Unset ""
	// server span deadline.server.inbound_budget_ms=60000 deadline.server.budget_ms=2000 deadline.server.limited_by=max deadline.server.ended_by=completed status=Unset ""
	// server span deadline.server.inbound_budget_ms=5 deadline.server.budget_ms=5 deadline.server.limited_by=header deadline.server.refusal=floor status=Error "budget 5ms at or below the 20ms floor"
}
