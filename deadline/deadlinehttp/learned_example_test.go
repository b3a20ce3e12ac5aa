package deadlinehttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// A route that takes about 80 ms refuses at once a request sent with 50 ms:
// its earlier requests (recorded here by hand; the middleware records every
// request it admits) say it would very likely not finish. Nothing of what
// was learned is in the answer.
func ExampleWithLearnedAdmission() {
	rec := &learn.Recorder{}
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 10 * time.Second, MinSamples: 100}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 100 {
		rec.Record("GET /report", deadline.EndedCompleted, 80*time.Millisecond, time.Now())
	}
	h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "report") }),
		deadlinehttp.WithLearnedAdmission(admission.Learned{Recorder: rec, Estimator: live, Threshold: 0.05}),
		deadlinehttp.WithAdmissionQueue(64, 256))
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /report", h)
	for _, budget := range []string{"50", "500"} {
		r := httptest.NewRequest(http.MethodGet, "/report", nil)
		r.Header.Set(deadlinehttp.DefaultHeader, budget)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Printf("budget %sms: %d %q %q\n", budget, w.Code, w.Header().Get(deadlinehttp.RefusedHeader), w.Body.String())
	}
	// Output:
	// budget 50ms: 504 "budget-ms=50, floor-ms=0, reason=learned" "deadline budget too small: budget-ms=50, floor-ms=0, reason=learned\n"
	// budget 500ms: 200 "" "report"
}
