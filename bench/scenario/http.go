package scenario

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/bench/peers"
)

// server is a loopback test server that records when requests arrived and
// how many it executed.
type server struct {
	mu       sync.Mutex
	arrivals []time.Time
	reply    func(n int, first time.Time, w http.ResponseWriter, r *http.Request)
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body) // executing = reading the whole request
	s.mu.Lock()
	s.arrivals = append(s.arrivals, time.Now())
	n, first := len(s.arrivals), s.arrivals[0]
	s.mu.Unlock()
	s.reply(n, first, w, r)
}

func (s *server) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.arrivals...)
}

// HTTPRun is the record of one HTTP call.
type HTTPRun struct {
	Start, Deadline, Return time.Time
	Status                  int
	Err                     error
	Arrivals                []time.Time // at the server
}

// Succeeded reports whether the caller's call succeeded: no error and a 2xx
// status handed back.
func (r *HTTPRun) Succeeded() bool { return r.Err == nil && r.Status >= 200 && r.Status < 300 }

// Requests is the number of requests the server received.
func (r *HTTPRun) Requests() int { return len(r.Arrivals) }

// Early counts requests that arrived sooner after the previous one than
// asked: the server's reply function decides what was asked.
func (r *HTTPRun) Early(asked time.Duration) int {
	n := 0
	for i := 1; i < len(r.Arrivals); i++ {
		if r.Arrivals[i].Sub(r.Arrivals[i-1]) < asked {
			n++
		}
	}
	return n
}

// Names reports whether the caller was told about status code: the status
// handed back, or the final error's text naming it as a status ("status
// 503", or "503 Service Unavailable" as net/http spells it). A bare number
// is not enough: the loopback URL's port may contain it.
func (r *HTTPRun) Names(code int) bool {
	if r.Status == code {
		return true
	}
	if r.Err == nil {
		return false
	}
	s, n := r.Err.Error(), strconv.Itoa(code)
	return strings.Contains(s, "status "+n) || strings.Contains(s, n+" "+http.StatusText(code))
}

// sendOnce runs one call against a fresh loopback server and transport.
func sendOnce(h peers.HTTPClient, m Mode, c peers.Call, method string, body []byte,
	reply func(int, time.Time, http.ResponseWriter, *http.Request)) *HTTPRun {
	s := &server{reply: reply}
	ts := httptest.NewServer(s) // listens on 127.0.0.1
	defer ts.Close()
	tr := &http.Transport{DialContext: (&net.Dialer{}).DialContext, MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	run := &HTTPRun{}
	ctx := context.Background()
	run.Start = time.Now()
	run.Deadline = run.Start.Add(c.Budget)
	if m == ModeContext {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, run.Deadline)
		defer cancel()
	}
	run.Status, run.Err = h.Send(ctx, c, tr, method, ts.URL, body)
	run.Return = time.Now()
	run.Arrivals = s.times()
	return run
}

// HTTPResults holds the runs of one HTTP scenario, per library and mode.
type HTTPResults map[string]map[Mode][]*HTTPRun

// PlanHTTP returns the jobs that run one HTTP scenario o.Runs times per
// library and mode, and the results they fill in once run (see RunAll).
func PlanHTTP(hs []peers.HTTPClient, modes []Mode, c peers.Call, o Options, method string, body []byte,
	reply func(int, time.Time, http.ResponseWriter, *http.Request)) (HTTPResults, []func()) {
	return plan(hs, modes, o, func(h peers.HTTPClient, m Mode) *HTTPRun {
		return sendOnce(h, m, c, method, body, reply)
	})
}

// RetryAfter3 is scenario 3's server: every request gets 503 with
// Retry-After: 3.
func RetryAfter3(_ int, _ time.Time, w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Retry-After", "3")
	w.WriteHeader(http.StatusServiceUnavailable)
}

// RetryAfter1 is scenario 4's server: 429 with Retry-After: 1 until one
// second after the first request, then 200.
func RetryAfter1(_ int, first time.Time, w http.ResponseWriter, _ *http.Request) {
	if time.Since(first) < time.Second {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

// PostFault returns scenario 5's server: the first delivery is answered
// 503 (fault "503") or executed and then the connection is reset (fault
// "reset"); later deliveries are answered 200.
func PostFault(fault string) func(int, time.Time, http.ResponseWriter, *http.Request) {
	return func(n int, _ time.Time, w http.ResponseWriter, _ *http.Request) {
		if n > 1 {
			_, _ = io.WriteString(w, "created")
			return
		}
		if fault == "503" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close with RST
		}
		_ = conn.Close()
	}
}

// Scenario3 is the call of scenario 3: budget 1s, the rest as scenario 1.
func Scenario3() peers.Call { return peers.Scenario1() }

// Scenario4 is the call of scenario 4: budget 3s, the rest as scenario 1.
func Scenario4() peers.Call {
	c := peers.Scenario1()
	c.Budget = 3 * time.Second
	return c
}

// RetryAfterBeyondTable renders scenario 3.
func RetryAfterBeyondTable(hs []peers.HTTPClient, res HTTPResults, c peers.Call) Table {
	t := Table{
		Title: fmt.Sprintf("Scenario 3: Retry-After beyond the budget (loopback 503 with Retry-After: 3, budget %v)", c.Budget),
		Header: []string{"library", "mode", "runs", "time to give up median", "time to give up max", "overshoot max",
			"requests received median (max)", "retries sooner than asked (total)", "caller told 503 (runs)", "goal"},
	}
	for _, h := range hs {
		for _, m := range Modes {
			runs := res[h.Name()][m]
			var giveUp, over Durations
			var reqs, early ints
			told := 0
			for _, x := range runs {
				giveUp = append(giveUp, x.Return.Sub(x.Start))
				over = append(over, x.Return.Sub(x.Deadline))
				reqs = append(reqs, x.Requests())
				early = append(early, x.Early(3*time.Second))
				if x.Names(503) {
					told++
				}
			}
			goal := "—"
			if _, ok := h.(peers.DeadlineHTTP); ok {
				goal = "never sooner than Retry-After: " + verdict(early.sum() == 0) + "; never past the deadline: " + verdict(over.Max() <= OvershootGoal)
			}
			t.Rows = append(t.Rows, []string{h.Name(), m.String(), fmt.Sprint(len(runs)), ms(giveUp.Quantile(0.5)), ms(giveUp.Max()),
				ms(over.Max()), fmt.Sprintf("%d (%d)", reqs.median(), reqs.max()), fmt.Sprint(early.sum()),
				fmt.Sprintf("%d/%d", told, len(runs)), goal})
		}
	}
	t.Notes = append(t.Notes, "A retry sooner than asked is a request that arrived less than 3s after the previous one. "+
		"“Caller told 503”: the response handed back, or the final error's text, names the 503.")
	return t
}

// RetryAfterWithinTable renders scenario 4.
func RetryAfterWithinTable(hs []peers.HTTPClient, res HTTPResults, c peers.Call) Table {
	t := Table{
		Title: fmt.Sprintf("Scenario 4: Retry-After within the budget (loopback 429 with Retry-After: 1 until 1s has passed, then 200; budget %v)", c.Budget),
		Header: []string{"library", "mode", "runs", "succeeded (runs)", "total time median", "total time max",
			"requests median (max)", "retries sooner than asked (total)", "goal"},
	}
	for _, h := range hs {
		for _, m := range Modes {
			runs := res[h.Name()][m]
			var total Durations
			var reqs, early ints
			ok := 0
			for _, x := range runs {
				total = append(total, x.Return.Sub(x.Start))
				reqs = append(reqs, x.Requests())
				early = append(early, x.Early(time.Second))
				if x.Err == nil && x.Status == 200 {
					ok++
				}
			}
			goal := "—"
			if _, isThis := h.(peers.DeadlineHTTP); isThis {
				goal = "honoured: " + verdict(early.sum() == 0 && ok == len(runs))
			}
			t.Rows = append(t.Rows, []string{h.Name(), m.String(), fmt.Sprint(len(runs)), fmt.Sprintf("%d/%d", ok, len(runs)),
				ms(total.Quantile(0.5)), ms(total.Max()), fmt.Sprintf("%d (%d)", reqs.median(), reqs.max()), fmt.Sprint(early.sum()), goal})
		}
	}
	t.Notes = append(t.Notes, "A retry sooner than asked is a request that arrived less than 1s after the previous one (each got a 429 asking for 1s).")
	return t
}

// PostTable renders scenario 5 from the runs of both faults.
func PostTable(hs []peers.HTTPClient, byFault map[string]HTTPResults, c peers.Call) Table {
	t := Table{
		Title: fmt.Sprintf("Scenario 5: POST safety (a POST without Idempotency-Key whose first delivery is executed and then fails; budget %v, mode ctx)", c.Budget),
		Header: []string{"library", "fault", "runs", "times the server executed the POST (median, max)", "runs executed more than once",
			"caller's call succeeded (runs)", "goal"},
	}
	for _, h := range hs {
		for _, fault := range []string{"503", "reset"} {
			runs := byFault[fault][h.Name()][ModeContext]
			var ex ints
			dup, ok := 0, 0
			for _, x := range runs {
				ex = append(ex, x.Requests())
				if x.Requests() > 1 {
					dup++
				}
				if x.Succeeded() {
					ok++
				}
			}
			goal := "—"
			if _, ok := h.(peers.DeadlineHTTP); ok {
				goal = "executed once: " + verdict(ex.max() == 1)
			}
			t.Rows = append(t.Rows, []string{h.Name(), fault, fmt.Sprint(len(runs)), fmt.Sprintf("%d, %d", ex.median(), ex.max()),
				fmt.Sprintf("%d/%d", dup, len(runs)), fmt.Sprintf("%d/%d", ok, len(runs)), goal})
		}
	}
	t.Notes = append(t.Notes, "Both columns matter: a library that replays the POST gets the second delivery's 200 and its caller's call "+
		"succeeds, with the POST executed twice; a library that does not replay it hands the first delivery's failure back, and its caller's "+
		"call fails although the POST took effect once (the caller must then find out, e.g. by reading the resource, or retry with an "+
		"Idempotency-Key). Succeeded = no error and a 2xx status handed back.")
	t.Notes = append(t.Notes, "Fault 503: the server executed the request and answered 503. Fault reset: it executed the request and reset the connection "+
		"(RST) instead of answering. Either way the POST had already taken effect once.")
	return t
}
