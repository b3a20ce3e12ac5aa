package otelbudgethttp_test

import (
	"log"
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// A server that gives every request the budget its caller sent, at most
// 5 s, refuses one that arrives with 20 ms or less, and records both on
// its SERVER span. The application sets up the SDK (the global providers
// here); the library needs only the API.
func ExampleNewHandler() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /search", func(w http.ResponseWriter, r *http.Request) {
		// r.Context() ends at the request's budget; an outgoing call made
		// with otelbudgethttp.NewTransport spends what is left of it.
	})
	h, err := otelbudgethttp.NewHandler(mux, "api", otelbudget.New(),
		deadlinehttp.WithMaxBudget(5*time.Second), deadlinehttp.WithFloor(20*time.Millisecond))
	if err != nil {
		log.Fatal(err) // an invalid option, e.g. a floor at or above the maximum
	}
	log.Fatal(http.ListenAndServe("localhost:8080", h))
}

// otelhttp options, such as a filter for health checks: those requests get
// no span, but still a budget.
func ExampleNewHandlerWith() {
	health := otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != "/healthz" })
	h, err := otelbudgethttp.NewHandlerWith(http.NotFoundHandler(), "api", otelbudget.New(),
		[]otelhttp.Option{health}, deadlinehttp.WithFloor(20*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("localhost:8080", h))
}
