package otelbudget_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
)

// The application installs its SDK's providers once, at start-up
// (otel.SetTracerProvider, otel.SetMeterProvider); New uses the global
// ones unless given others, so one observer built at start-up serves every
// call. The examples of the module otelbudget/test show the spans and
// metrics an SDK records.
func ExampleNew() {
	obs := otelbudget.New() // otel.GetTracerProvider() and otel.GetMeterProvider()
	fmt.Println(obs.TracerProvider() == otel.GetTracerProvider(), obs.MeterProvider() == otel.GetMeterProvider())

	// Or with providers of its own (an SDK's, here the API's no-op ones).
	quiet := otelbudget.New(
		otelbudget.WithTracerProvider(tracenoop.NewTracerProvider()),
		otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))
	fmt.Println(quiet.Hooks() == nil, "(nothing to observe: nil hooks cost the engine nothing)")
	// Output:
	// true true
	// true (nothing to observe: nil hooks cost the engine nothing)
}

// Observe an operation of your own: the hooks go on its policy, or on a
// context to observe every call made under it. Each call is a span with a
// child span per attempt; attaching the same observer in both places
// records it once.
func ExampleObserver_Hooks() {
	obs := otelbudget.New()

	p := deadline.DefaultPolicy()
	p.Name = "search"
	p.Hooks = obs.Hooks()
	ctx := deadline.WithHooks(context.Background(), obs.Hooks()) // harmless twice

	v, err := deadline.Do(ctx, deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
		// ctx carries the attempt span: what the operation starts is its child.
		if a.Number == 1 {
			return "", deadline.Retryable(errors.New("503 Service Unavailable"))
		}
		return "results", nil
	})
	fmt.Println(v, err)
	// Output:
	// results <nil>
}

// The HTTP composition by hand, which otelbudgethttp.NewTransport makes in
// one line: otelhttp with the observer's ClientTracerProvider sends each
// attempt, and the transport carries ClientHooks, so each physical request
// is one CLIENT span with the attempt attributes, a child of the call span.
func ExampleObserver_ClientHooks() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	obs := otelbudget.New()
	pool := http.DefaultTransport.(*http.Transport).Clone()
	defer pool.CloseIdleConnections()

	base := otelhttp.NewTransport(pool,
		otelhttp.WithTracerProvider(obs.ClientTracerProvider()),
		otelhttp.WithMeterProvider(obs.MeterProvider()))
	client := &http.Client{Transport: deadlinehttp.NewTransport(base, deadlinehttp.WithHooks(obs.ClientHooks()))}

	ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close() // the request's CLIENT span ends here
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// 200 ok
}

// The duration histograms to select in an SDK View for base-2 exponential
// aggregation:
//
//	sdkmetric.NewView(sdkmetric.Instrument{Name: name},
//		sdkmetric.Stream{Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}})
func ExampleDurationInstruments() {
	for _, name := range otelbudget.DurationInstruments() {
		fmt.Println(name)
	}
	// Output:
	// deadline.call.duration
	// deadline.attempt.duration
	// deadline.call.slack
}

// exampleSpan is a span's attributes, as a Collector or a file holds them.
type exampleSpan map[attribute.Key]attribute.Value

func (s exampleSpan) Lookup(k attribute.Key) (attribute.Value, bool) {
	v, ok := s[k]
	return v, ok
}

// An attempt span read as a learner records it: a ceiling timeout is
// censored at its grant, "longer than 100ms".
func ExampleReadAttemptSample() {
	span := exampleSpan{
		otelbudget.AttrStep:             attribute.StringValue("fetch"),
		otelbudget.AttrAttemptEndedBy:   attribute.StringValue("attempt_timeout"),
		otelbudget.AttrAttemptGrantedMs: attribute.Int64Value(100),
	}
	start := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	s, err := otelbudget.ReadAttemptSample(span, start, start.Add(103*time.Millisecond))
	fmt.Println(s.Step, s.EndedBy, s.Duration, s.Censored(), err)
	// Output: fetch attempt_timeout 100ms true <nil>
}
