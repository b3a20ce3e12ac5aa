// Package outage is the outage model of issue 12: K clients call one server
// that completes C requests per second, one after the other, in the order
// they arrived; a request that would wait more than MaxQueue is answered 503
// at once, and the server finishes every request it queued, even one its
// client stopped waiting for. For a window (the outage) the server stalls:
// it completes nothing, so every request of the window fails, at once (503,
// the queue is full) or by timing out in the queue (the last MaxQueue of the
// window). When it resumes, its queue is full of requests whose clients have
// gone: a new request waits MaxQueue, longer than an attempt may, and times
// out. Clients that retry keep offering more than C requests per second, the
// queue stays full, and goodput stays at zero with the server up (a
// metastable failure) until the offered load falls under C.
//
// With [Model.Admission] the server is instead this project's server
// admission: deadlinehttp's middleware with WithAdmissionQueue and
// WithLearnedAdmission in front of the same server, which then works one
// request at a time (a queue of one slot) and learns its service time. A
// request waits for the slot only while what is left of its budget still
// covers the learned service time, and is answered 504 with
// Deadline-Refused (which this project's client never retries) as soon as
// it does not; the newest is served first once a queue stands (adaptive
// LIFO). Nothing it starts is abandoned, so no queue of dead requests is
// left behind by the outage.
//
// Everything runs in virtual time (testing/synctest): [Simulate] must be
// called inside a bubble.
package outage

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/bench/peers"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// Model is the outage model's parameters.
type Model struct {
	Clients  int           // K: clients, each starting one logical call every Interval
	Interval time.Duration // between one client's calls (open loop: a call starts on time even if the last one has not ended)
	Capacity int           // C: requests the server completes per second, one after the other
	MaxQueue time.Duration // a request that would wait longer than this for the server is answered 503 at once
	// Warmup is the time before the outage, Outage its length, After the
	// time measured after it.
	Warmup, Outage, After time.Duration
	Call                  peers.Call // each logical call's policy; the caller's context carries Call.Budget
	// Admission puts this project's server admission in front of the
	// server (see the package doc): a queue of one slot and a backlog of
	// MaxQueue × Capacity requests, learned admission at
	// [AdmissionThreshold]. The attempt's lease is sent as the budget
	// header. Only the retriers that read the server's answer headers
	// (this project's HTTP transport) see its refusals as refusals.
	Admission bool
}

// AdmissionThreshold is the learned admission's threshold in the
// admission rows: a request is refused when it completes within what is
// left of its budget with a probability below 5%.
const AdmissionThreshold = 0.05

// Default is the model published in docs/benchmarks.md: 200 clients, one
// call per second each (200 calls/s) on a server of capacity 250 requests/s
// (80% busy before the outage); 5s warm-up, a 10s outage, 25s after it;
// each call: budget 1s, per-attempt 400ms, backoff 100ms..400ms, at most 3
// attempts, this project's 20ms floor.
func Default() Model {
	return Model{
		Clients: 200, Interval: time.Second, Capacity: 250, MaxQueue: 2 * time.Second,
		Warmup: 5 * time.Second, Outage: 10 * time.Second, After: 25 * time.Second,
		Call: peers.Call{
			Budget: time.Second, AttemptTimeout: 400 * time.Millisecond,
			BackoffBase: 100 * time.Millisecond, BackoffMax: 400 * time.Millisecond,
			MaxAttempts: 3, Floor: 20 * time.Millisecond,
		},
	}
}

// Validate reports the first parameter out of range.
func (m Model) Validate() error {
	switch {
	case m.Clients < 1:
		return fmt.Errorf("outage: Clients is %d, want >= 1", m.Clients)
	case m.Interval <= 0:
		return fmt.Errorf("outage: Interval is %v, want > 0", m.Interval)
	case m.Capacity < 1:
		return fmt.Errorf("outage: Capacity is %d, want >= 1 request per second", m.Capacity)
	case m.MaxQueue < 0:
		return fmt.Errorf("outage: MaxQueue is %v, want >= 0", m.MaxQueue)
	case m.Warmup < time.Second || m.Outage <= 0 || m.After < time.Second:
		return fmt.Errorf("outage: Warmup %v, Outage %v, After %v: want Warmup >= 1s, Outage > 0, After >= 1s", m.Warmup, m.Outage, m.After)
	}
	return m.Call.Validate()
}

// String describes the model in one line.
func (m Model) String() string {
	if m.Admission {
		m.Admission = false
		return m.String() + fmt.Sprintf("; server admission: deadlinehttp.NewHandler(WithAdmissionQueue(1, %d), WithLearnedAdmission(threshold %g))",
			m.backlog(), AdmissionThreshold)
	}
	return fmt.Sprintf("%d clients × 1 call per %v (%.0f calls/s) on a server completing %d requests/s in arrival order, 503 at once beyond %v of queue, "+
		"finishing abandoned requests; %v before, a %v outage (the server stalls: completes nothing, queues what fits), %v after; "+
		"each call: budget %v on the caller's context, per-attempt %v, backoff %v..%v, ≤%d attempts",
		m.Clients, m.Interval, float64(m.Clients)*float64(time.Second)/float64(m.Interval), m.Capacity, m.MaxQueue,
		m.Warmup, m.Outage, m.After, m.Call.Budget, m.Call.AttemptTimeout, m.Call.BackoffBase, m.Call.BackoffMax, m.Call.MaxAttempts)
}

// Second is what happened in one second of the run: logical calls started
// in it and how many of those succeeded, requests sent in it.
type Second struct {
	Calls, Good, Requests int
}

// Result is one library's run of the model.
type Result struct {
	Library string
	Seconds []Second // one per second of the run
	// Calls, Good and Requests are the run's totals.
	Calls, Good, Requests int
	// OutageAmplification is requests sent during the outage per logical
	// call started during it.
	OutageAmplification float64
	// Baseline is the share of calls that succeeded during the warm-up.
	Baseline float64
	// Recovery is the time from the end of the outage to the start of the
	// first second from which every second's calls succeed at least 90% as
	// often as during the warm-up; -1 when that never happens in the run.
	Recovery time.Duration
}

// Goodput is the share of the run's logical calls that succeeded.
func (r Result) Goodput() float64 { return float64(r.Good) / float64(max(r.Calls, 1)) }

// backlog is the admission queue's backlog: MaxQueue of work.
func (m Model) backlog() int { return int(m.MaxQueue * time.Duration(m.Capacity) / time.Second) }

// server is the model's server.
type server struct {
	m     Model
	start time.Time
	h     http.Handler   // with Admission: the middleware in front of serve
	work  sync.WaitGroup // with Admission: requests still in the server

	mu        sync.Mutex
	free      time.Time // when the server has finished everything it accepted
	perSecond []Second
}

// newAdmission returns the admission middleware in front of s.serve.
func (s *server) newAdmission() (http.Handler, error) {
	rec := &learn.Recorder{}
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: s.m.Call.Budget, MinSamples: 100}})
	if err != nil {
		return nil, err
	}
	return deadlinehttp.NewHandler(http.HandlerFunc(s.serve),
		deadlinehttp.WithAdmissionQueue(1, s.m.backlog()),
		deadlinehttp.WithLearnedAdmission(admission.Learned{Recorder: rec, Estimator: live, Threshold: AdmissionThreshold}),
		deadlinehttp.WithRoute(func(*http.Request) string { return "work" }))
}

// serve is the server behind the admission middleware, holding its one
// slot: a request takes 1/Capacity, and one started in the outage stalls
// until it ends; it finishes what it started whether its client waits or
// not.
func (s *server) serve(http.ResponseWriter, *http.Request) {
	begin := time.Now()
	if resume := s.start.Add(s.m.Warmup + s.m.Outage); begin.Sub(s.start) >= s.m.Warmup && begin.Before(resume) {
		begin = resume
	}
	time.Sleep(time.Until(begin.Add(time.Second / time.Duration(s.m.Capacity))))
}

// admitted is one request to the server with admission: the attempt's
// lease goes as the budget header, and the server's request ends when the
// attempt does (its client gone). A status other than 200 is a [Failure]
// with the answer's headers.
func (s *server) admitted(ctx context.Context) error {
	s.mu.Lock()
	s.perSecond[s.second(time.Now())].Requests++
	s.mu.Unlock()
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, "http://server.invalid/", nil)
	if err != nil {
		cancel()
		return err
	}
	if end, ok := ctx.Deadline(); ok {
		req.Header.Set(deadlinehttp.DefaultHeader, deadlinehttp.FormatBudget(time.Until(end)))
	}
	w := httptest.NewRecorder()
	done := make(chan struct{})
	s.work.Go(func() {
		defer close(done)
		defer stop()
		defer cancel()
		s.h.ServeHTTP(w, req)
	})
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if w.Code != http.StatusOK {
		return &peers.Failure{Status: w.Code, Header: w.Header()}
	}
	return nil
}

func (s *server) second(t time.Time) int {
	return min(max(int(t.Sub(s.start)/time.Second), 0), len(s.perSecond)-1)
}

// handle is one request, as the operation every library retries.
func (s *server) handle(ctx context.Context) error {
	now := time.Now()
	s.mu.Lock()
	s.perSecond[s.second(now)].Requests++
	begin := now
	if s.free.After(begin) {
		begin = s.free
	}
	if resume := s.start.Add(s.m.Warmup + s.m.Outage); now.Sub(s.start) >= s.m.Warmup && begin.Before(resume) {
		begin = resume // stalled: nothing starts before the outage ends
	}
	if begin.Sub(now) > s.m.MaxQueue {
		s.mu.Unlock()
		return &peers.Failure{Status: 503}
	}
	s.free = begin.Add(time.Second / time.Duration(s.m.Capacity))
	done := s.free
	s.mu.Unlock()
	return wait(ctx, done.Sub(now), nil)
}

// wait returns answer after d, or ctx's error if it ends first.
func wait(ctx context.Context, d time.Duration, answer error) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return answer
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Simulate runs the model once for r. It must run inside a synctest bubble
// (the model's minute-long runs take no real time there).
func Simulate(r peers.Retrier, m Model) (Result, error) {
	if err := m.Validate(); err != nil {
		return Result{}, err
	}
	total := m.Warmup + m.Outage + m.After
	s := &server{m: m, start: time.Now(), perSecond: make([]Second, int((total+time.Second-1)/time.Second))}
	op := s.handle
	if m.Admission {
		h, err := s.newAdmission()
		if err != nil {
			return Result{}, err
		}
		s.h, op = h, s.admitted
		defer s.work.Wait()
	}
	var wg sync.WaitGroup
	for k := range m.Clients {
		wg.Go(func() {
			// Client k starts its calls at k/K of the interval, so that the
			// clients' calls are spread evenly.
			next := s.start.Add(m.Interval * time.Duration(k) / time.Duration(m.Clients))
			for next.Before(s.start.Add(total)) {
				time.Sleep(time.Until(next))
				wg.Go(func() {
					started := time.Now()
					ctx, cancel := context.WithDeadline(context.Background(), started.Add(m.Call.Budget))
					defer cancel()
					err := r.Do(ctx, m.Call, op) // any error is a failed call
					s.mu.Lock()
					defer s.mu.Unlock()
					sec := &s.perSecond[s.second(started)]
					sec.Calls++
					if err == nil {
						sec.Good++
					}
				})
				next = next.Add(m.Interval)
			}
		})
	}
	wg.Wait()
	res := Result{Library: r.Name(), Seconds: s.perSecond, Recovery: -1}
	w, o := int(m.Warmup/time.Second), int((m.Warmup+m.Outage)/time.Second)
	var warm, outage Second
	for i, sec := range s.perSecond {
		res.Calls += sec.Calls
		res.Good += sec.Good
		res.Requests += sec.Requests
		switch {
		case i >= 1 && i < w: // the first second fills the pipeline
			warm.Calls += sec.Calls
			warm.Good += sec.Good
		case i >= w && i < o:
			outage.Calls += sec.Calls
			outage.Requests += sec.Requests
		}
	}
	res.Baseline = float64(warm.Good) / float64(max(warm.Calls, 1))
	res.OutageAmplification = float64(outage.Requests) / float64(max(outage.Calls, 1))
	// The last second's calls may end after the run: leave it out.
	for i := o; i < len(s.perSecond)-1; i++ {
		ok := true
		for _, sec := range s.perSecond[i : len(s.perSecond)-1] {
			if float64(sec.Good) < 0.9*res.Baseline*float64(sec.Calls) {
				ok = false
				break
			}
		}
		if ok {
			res.Recovery = time.Duration(i-o) * time.Second
			break
		}
	}
	return res, nil
}

// NoRetries names the reference row: the hand-written loop with one attempt
// per call.
const NoRetries = "no retries (1 attempt per call, reference)"

// Report is what TestOutageReport writes for cmd/compare: the model, one
// Result per library, in the order of [Libraries], then the [NoRetries]
// reference; and the sweep of the overload charge: Sweep[i] is this
// project's overload-charge row charging Charges[i] tokens ([OverloadSweep]).
type Report struct {
	Model   string
	Results []Result
	Sweep   []Result
	Charges []int
}

// OverloadCharge is the tokens this project's overload-charge row
// ([peers.DeadlineOverload]) charges the shared retry budget per 503
// without Retry-After: the smallest charge of [OverloadSweep] with which
// the model recovers within the run (1 and 2 do not; 10 does as well as 5).
const OverloadCharge = 5

// OverloadSweep is the charges the overload sweep runs, 0 (the retry budget
// alone, through the HTTP transport) included.
var OverloadSweep = []int{0, 1, 2, 5, 10}

// Libraries returns the retriers the outage model compares: every library
// of peers.All; right after this project, this project with its retry
// budget and then with the same budget charged [OverloadCharge] tokens per
// overload answer; and failsafe-go with its retry budget (failsafe-go's
// defaults, max rate 0.2 and min concurrency 3) right after failsafe-go, as
// the issue asks. Each call returns new retriers: a budget belongs to one
// run.
func Libraries(m Model) ([]peers.Retrier, error) {
	fb, err := peers.NewFailsafeBudget(m.Call, 0.2, 3)
	if err != nil {
		return nil, err
	}
	ob, err := peers.NewDeadlineOverload(m.Call, OverloadCharge)
	if err != nil {
		return nil, err
	}
	var out []peers.Retrier
	for _, r := range peers.All() {
		out = append(out, r)
		switch r.(type) {
		case peers.Deadline:
			out = append(out, &peers.DeadlineBudget{}, ob)
		case peers.Failsafe:
			out = append(out, fb)
		}
	}
	return out, nil
}

// AdmissionName is the name of the row of this project's client against
// the server with admission ([Model.Admission]).
const AdmissionName = "deadline (this) + retry budget + server admission"

// NoRetriesAdmission names the reference row against the server with
// admission: one attempt per call.
const NoRetriesAdmission = "no retries + server admission (reference)"

// Row is one row run with its own model.
type Row struct {
	Retrier peers.Retrier
	Model   Model
}

// AdmissionRows returns the rows run against the server with admission:
// this project's client through its HTTP transport with the retry budget's
// defaults and no overload charge (deadlinehttp.NewTransport,
// WithRetryBudget(deadline.NewRetryBudget()), one transport shared by
// every client), then the no-retries reference. Each call returns new
// retriers: a budget belongs to one run.
func AdmissionRows(m Model) ([]Row, error) {
	m.Admission = true
	o, err := peers.NewDeadlineOverload(m.Call, 0)
	if err != nil {
		return nil, err
	}
	m1 := m
	m1.Call.MaxAttempts = 1
	return []Row{
		{Retrier: named{o, AdmissionName, "deadlinehttp.NewTransport(in-memory base calling the server's handler, WithPolicy(the Policy of deadline (this)), " +
			"WithDefaultBudget(Budget), WithRetryBudget(deadline.NewRetryBudget())): the retry budget's defaults, no overload charge"}, Model: m},
		{Retrier: named{peers.Baseline{}, NoRetriesAdmission, "the hand-written loop, 1 attempt per call"}, Model: m1},
	}, nil
}

// named is a retrier under another name and description.
type named struct {
	peers.Retrier
	name, config string
}

func (n named) Name() string   { return n.name }
func (n named) Config() string { return n.config }
