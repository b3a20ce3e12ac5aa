package overload

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// Caller makes the logical calls of one run: one row's limiter, throttle,
// breaker or client in front of the downstream.
type Caller interface {
	// Call makes call c, whose deadline ctx carries, sending its requests
	// with send; nil means c got its answer.
	Call(ctx context.Context, c Call, send Send) error
}

// CallerFunc is a Caller written as a function.
type CallerFunc func(ctx context.Context, c Call, send Send) error

// Call calls f.
func (f CallerFunc) Call(ctx context.Context, c Call, send Send) error { return f(ctx, c, send) }

// Env is what a row is given to build its Caller for one run.
type Env struct {
	Model Model
	// Peek is set for the plain downstream only (not with admission): it
	// sends c's request only if admit, told when the downstream would
	// answer it (after its queue and its service time), returns true;
	// otherwise it returns [ErrNotSent] without sending. Only the oracle
	// uses it: it is the knowledge no real client has.
	Peek func(ctx context.Context, c Call, admit func(done time.Time) bool) error
}

// ErrNotSent is Peek's answer when admit refused.
var ErrNotSent = errors.New("overload: not sent: the oracle knows it would miss its deadline")

// Row is one row of the tables: a way of calling the downstream.
type Row struct {
	Name, Config string
	// Admission makes the downstream run this project's server admission
	// (package deadline/admission) in place of its FIFO queue: see
	// [AdmissionConfig].
	Admission bool
	// New builds the row's Caller for one run; it is called inside the
	// run's bubble, so that what it builds reads the bubble's clock.
	New func(env Env) (Caller, error)
}

// plain is the downstream: Workers workers, a FIFO queue bounded by the
// wait; it finishes every request it accepted.
type plain struct {
	m   Model
	rec *recorder

	mu   sync.Mutex
	free []time.Time // when each worker is next free
}

func (p *plain) send(ctx context.Context, c Call, admit func(time.Time) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	stop, stops := p.m.handlerEnd(ctx, now)
	p.mu.Lock()
	w := 0
	for i, f := range p.free {
		if f.Before(p.free[w]) {
			w = i
		}
	}
	begin := now
	if p.free[w].After(now) {
		begin = p.free[w]
	}
	if begin.Sub(now) > p.m.MaxQueue {
		p.mu.Unlock()
		return ErrOverloaded
	}
	spent := c.Service
	if stops {
		spent = min(max(stop.Sub(begin), 0), c.Service)
	}
	done := begin.Add(spent)
	if admit != nil && !admit(begin.Add(c.Service)) {
		p.mu.Unlock()
		return ErrNotSent
	}
	p.free[w] = done
	p.mu.Unlock()
	t := time.NewTimer(done.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		if spent < c.Service { // the handler stopped at its deadline
			p.rec.work(now, c, spent, true)
			return context.DeadlineExceeded
		}
		p.rec.work(now, c, spent, false)
		return nil
	case <-ctx.Done():
		p.rec.work(now, c, spent, true)
		return ctx.Err()
	}
}

// handlerEnd returns when the downstream's handler of a request sent at
// now with ctx stops, and true, in the propagated variant: now + the
// request's budget in whole milliseconds, rounded up (the header's), as
// this project's server side derives it; otherwise false (it finishes).
func (m Model) handlerEnd(ctx context.Context, now time.Time) (time.Time, bool) {
	end, ok := ctx.Deadline()
	if !m.Propagate || !ok {
		return time.Time{}, false
	}
	budget := (end.Sub(now) + time.Millisecond - 1).Truncate(time.Millisecond)
	return now.Add(max(budget, 0)), true
}

// AdmissionThreshold is the learned admission's threshold in the
// downstream with admission: a request is refused when it completes within
// its budget with a probability below 5% (as in the outage model).
const AdmissionThreshold = 0.05

// AdmissionConfig describes the downstream with admission.
const AdmissionConfig = "the downstream behind admission.NewAdmitter(Config{Limiter: NewQueue(Workers, Backlog × capacity), " +
	"Learned: {Recorder, (*learn.Recorder).Live(Max 1s, MinSamples 100), Threshold 0.05}}) per route; the request carries what is left of the " +
	"attempt's deadline as its budget, and its context ends when the attempt does (a waiting request leaves the queue; one being served is finished, " +
	"or in the propagated variant stopped at the deadline the admission derived)"

// admitted is the downstream with this project's server admission: an
// admission queue of Workers slots and a backlog of MaxQueue of work, with
// learned admission per route.
type admitted struct {
	m    Model
	rec  *recorder
	g    *admission.Admitter
	work sync.WaitGroup
}

func newAdmitted(m Model, rec *recorder) (*admitted, error) {
	backlog := m.Backlog
	if backlog == 0 {
		backlog = m.MaxQueue
	}
	q, err := admission.NewQueue(m.Workers, int(backlog.Seconds()*m.Capacity()))
	if err != nil {
		return nil, err
	}
	lr := &learn.Recorder{}
	live, err := lr.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}})
	if err != nil {
		return nil, err
	}
	g, err := admission.NewAdmitter(admission.Config{Limits: admission.DefaultLimits(), Limiter: q,
		Learned: &admission.Learned{Recorder: lr, Estimator: live, Threshold: AdmissionThreshold}})
	if err != nil {
		return nil, err
	}
	return &admitted{m: m, rec: rec, g: g}, nil
}

func (a *admitted) send(ctx context.Context, c Call) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	var in admission.Inbound
	if end, ok := a.m.handlerEnd(ctx, now); ok {
		in = admission.Inbound{Present: true, Budget: end.Sub(now)}
	} else if end, ok := ctx.Deadline(); ok {
		in = admission.Inbound{Present: true, Budget: end.Sub(now)}
	}
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	answer := make(chan error, 1)
	a.work.Go(func() {
		defer cancel()
		defer stop()
		d, t := a.g.Admit(sctx, c.Route, in, deadline.Deadline{})
		switch {
		case d.Refusal == admission.RefusalQueueFull && d.Queued: // shed after waiting
			answer <- ErrShed
			return
		case d.Refusal == admission.RefusalQueueFull:
			answer <- ErrOverloaded
			return
		case d.Refused():
			answer <- &Refused{Reason: d.Refusal.String()}
			return
		}
		spent, hctx := c.Service, sctx // finished even if its caller has left
		if a.m.Propagate {             // or stopped at the deadline the admission derived
			var stop context.CancelFunc
			hctx, stop = d.Deadline.Scope(sctx)
			defer stop()
			spent = min(max(time.Until(d.Deadline.End()), 0), c.Service)
		}
		time.Sleep(spent)
		t.Done(hctx, true)
		a.rec.work(now, c, spent, spent < c.Service || sctx.Err() != nil)
		if spent < c.Service {
			answer <- context.DeadlineExceeded
			return
		}
		answer <- nil
	})
	select {
	case err := <-answer:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closer is a Caller that holds something to release after its run.
type closer interface{ Close() }

// Simulate runs the model once for row. It must run inside a synctest
// bubble.
func Simulate(row Row, m Model) (Result, error) {
	if err := m.Validate(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	total := m.Before + m.Overload + m.After
	onset, end := start.Add(m.Before), start.Add(m.Before+m.Overload)
	rec := &recorder{start: start, secs: make([]second, int((total+time.Second-1)/time.Second)),
		coldFrom: onset, coldTo: onset.Add(m.Cold), steadyFrom: onset.Add(m.SteadyFrom), steadyTo: end, onset: onset, end: end}
	env := Env{Model: m}
	var send func(ctx context.Context, c Call) error
	var adm *admitted
	if row.Admission {
		var err error
		if adm, err = newAdmitted(m, rec); err != nil {
			return Result{}, err
		}
		send = adm.send
	} else {
		p := &plain{m: m, rec: rec, free: make([]time.Time, m.Workers)}
		for i := range p.free {
			p.free[i] = start
		}
		send = func(ctx context.Context, c Call) error { return p.send(ctx, c, nil) }
		env.Peek = p.send
	}
	caller, err := row.New(env)
	if err != nil {
		return Result{}, err
	}
	capacity := m.Capacity()
	rng := rand.New(rand.NewPCG(m.Seed, 31))
	var wg sync.WaitGroup
	t := start
	for i := 0; ; i++ {
		rate := m.Base * capacity
		if !t.Before(onset) && t.Before(end) {
			rate = m.Load * capacity
		}
		t = t.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if !t.Before(start.Add(total)) {
			break
		}
		route, budget := m.draw(rng)
		service := route.draw(rng)
		time.Sleep(time.Until(t))
		c := Call{Index: i, Route: route.Name, Service: service, Start: time.Now()}
		c.Deadline = c.Start.Add(budget)
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(context.Background(), c.Deadline)
			err := caller.Call(ctx, c, func(ctx context.Context) error { return send(ctx, c) })
			now := time.Now()
			cancel()
			rec.call(c, err == nil && !now.After(c.Deadline), now.Sub(c.Start))
		})
	}
	wg.Wait()
	if adm != nil {
		adm.work.Wait()
	}
	if cl, ok := caller.(closer); ok {
		cl.Close()
	}
	return rec.result(row.Name, m), nil
}

// result computes the run's figures.
func (r *recorder) result(name string, m Model) Result {
	capacity := m.Capacity()
	res := Result{Row: name, Seed: m.Seed, Load: m.Load, Onset: -1, Recovery: -1,
		Cold:   r.phase(r.coldFrom, r.coldTo, r.cold, capacity),
		Steady: r.phase(r.steadyFrom, r.steadyTo, r.steady, capacity),
		Whole:  r.phase(r.onset, r.end, r.whole, capacity)}
	for _, s := range r.secs {
		res.PerSecond = append(res.PerSecond, s.Good)
	}
	b, e := int(m.Before/time.Second), int((m.Before+m.Overload)/time.Second)
	var before second
	for _, s := range r.secs[min(1, b):b] { // the first second fills the pipeline
		before.Calls += s.Calls
		before.Good += s.Good
	}
	res.Baseline = float64(before.Good) / float64(max(before.Calls, 1))
	if b < 2 { // a cold start: the calls that can make it at all
		var all second
		for _, s := range r.secs {
			all.Calls += s.Calls
			all.Possible += s.Possible
		}
		res.Baseline = float64(all.Possible) / float64(max(all.Calls, 1))
	}
	for i := b; i < e; i++ {
		if float64(r.secs[i].Good) >= 0.9*capacity {
			res.Onset = time.Duration(i-b+1) * time.Second
			break
		}
	}
	// The last second's calls may end after the run: leave it out.
	for i := e; i < len(r.secs)-1; i++ {
		ok := true
		for _, s := range r.secs[i : len(r.secs)-1] {
			if float64(s.Good) < 0.9*res.Baseline*float64(s.Calls) {
				ok = false
				break
			}
		}
		if ok {
			res.Recovery = time.Duration(i-e) * time.Second
			break
		}
	}
	return res
}
