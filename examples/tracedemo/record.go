package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// runRecord is what the budget did during one run, collected from the
// deadline hooks: the input of the waterfall and of the scenario check.
// Times are offsets from the start of the run's deadline.
type runRecord struct {
	Scenario string
	About    string // what the scenario shows
	Seed     uint64
	Budget   time.Duration
	Floor    time.Duration
	Calls    []callRecord
	NotRun   []notRunRecord // the steps never started, in plan order
	Used     time.Duration  // from the start of the run to the end of the plan
	Left     time.Duration  // budget left at the end of the plan
}

// notRunRecord is a step of the plan that the agent never started: an
// earlier step failed for a reason other than the budget, and the plan
// stopped there. (A step that the budget stopped does not stop the plan;
// the budget then refuses, locally, each later step that cannot start, and
// that refusal is a call with its own record.)
type notRunRecord struct {
	Name  string
	After string // the step whose failure stopped the plan
	Cause string // why that step failed: its stop reason, or the error
}

// callRecord is one logical call (a step of the plan).
type callRecord struct {
	Name        string
	Start       time.Duration
	End         time.Duration
	Ceiling     time.Duration
	MaxAttempts int
	Remaining   time.Duration // budget left when the call started
	Attempts    []attemptRecord
	Waits       []waitRecord
	Reason      deadline.Reason
	Verdict     deadline.Verdict
	Started     int           // attempts started
	Left        time.Duration // budget left when the call ended
}

// attemptRecord is one attempt: one physical request.
type attemptRecord struct {
	Number    int
	Start     time.Duration
	Granted   time.Duration
	Remaining time.Duration
	LimitedBy deadline.Limit
	Used      time.Duration
	EndedBy   deadline.EndedBy
	Status    int    // the HTTP status of a retryable failure, else 0
	Code      string // the gRPC code of a retryable failure, else ""
}

// waitRecord is the wait chosen after a failed attempt.
type waitRecord struct {
	After     int // the attempt that failed
	Start     time.Duration
	Delay     time.Duration
	Source    deadline.BackoffSource
	Remaining time.Duration
	Fits      bool
}

// recorder collects a runRecord from the deadline hooks of every call made
// under one run. It is safe for concurrent use.
type recorder struct {
	origin time.Time

	mu  sync.Mutex
	rec runRecord
}

// newRecorder returns a recorder whose time axis starts at the start of d.
func newRecorder(sc scenario, seed uint64, d deadline.Deadline) *recorder {
	return &recorder{
		origin: d.End().Add(-d.Budget()),
		rec:    runRecord{Scenario: sc.name, About: sc.about, Seed: seed, Budget: d.Budget(), Floor: floor},
	}
}

func (r *recorder) since(t time.Time) time.Duration { return t.Sub(r.origin) }

// current returns the call being recorded. The caller holds r.mu.
func (r *recorder) current() *callRecord {
	if len(r.rec.Calls) == 0 {
		// Hooks always start with CallStart; keep a placeholder rather than
		// panic if that contract were ever broken.
		r.rec.Calls = append(r.rec.Calls, callRecord{Name: "?"})
	}
	return &r.rec.Calls[len(r.rec.Calls)-1]
}

// hooks returns the deadline hooks that feed r.
func (r *recorder) hooks() *deadline.Hooks {
	return &deadline.Hooks{
		CallStart: func(ctx context.Context, c deadline.CallInfo) context.Context {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.rec.Calls = append(r.rec.Calls, callRecord{
				Name: c.Name, Start: r.since(c.Start), Ceiling: c.Ceiling,
				MaxAttempts: c.MaxAttempts, Remaining: c.Remaining,
			})
			return nil
		},
		AttemptEnd: func(ctx context.Context, a deadline.AttemptInfo, res deadline.AttemptResult) {
			r.mu.Lock()
			defer r.mu.Unlock()
			c := r.current()
			c.Attempts = append(c.Attempts, attemptRecord{
				Number: a.Number, Start: r.since(a.Start), Granted: a.Granted,
				Remaining: a.Remaining, LimitedBy: a.LimitedBy,
				Used: res.Duration, EndedBy: res.EndedBy, Status: statusOf(res.Err), Code: codeOf(res.Err),
			})
		},
		Backoff: func(ctx context.Context, b deadline.BackoffInfo) {
			now := time.Now()
			r.mu.Lock()
			defer r.mu.Unlock()
			c := r.current()
			c.Waits = append(c.Waits, waitRecord{
				After: b.Attempt, Start: r.since(now), Delay: b.Delay,
				Source: b.Source, Remaining: b.Remaining, Fits: b.Fits,
			})
		},
		CallEnd: func(ctx context.Context, res deadline.CallResult) {
			now := time.Now()
			r.mu.Lock()
			defer r.mu.Unlock()
			c := r.current()
			c.End = r.since(now)
			c.Reason = res.Reason
			c.Verdict = deadline.VerdictOf(res)
			c.Started = res.Attempts
			c.Left = res.Remaining
		},
	}
}

// notRun records that steps were never started because step after failed
// with cause.
func (r *recorder) notRun(steps []step, after, cause string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range steps {
		r.rec.NotRun = append(r.rec.NotRun, notRunRecord{Name: s.name, After: after, Cause: cause})
	}
}

// finish records the end of the plan and returns the record.
func (r *recorder) finish(d deadline.Deadline) runRecord {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Used = r.since(now)
	r.rec.Left = d.End().Sub(now)
	out := r.rec
	out.Calls = append([]callRecord(nil), r.rec.Calls...)
	out.NotRun = append([]notRunRecord(nil), r.rec.NotRun...)
	return out
}

// statusOf returns the HTTP status an attempt failed with, or 0.
func statusOf(err error) int {
	if se, ok := errors.AsType[*deadlinehttp.StatusError](err); ok {
		return se.StatusCode()
	}
	return 0
}

// codeOf returns the gRPC code an attempt failed with when it is one a
// provider answers to be retried (UNAVAILABLE, RESOURCE_EXHAUSTED), or "".
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	switch c := status.Code(err); c {
	case codes.Unavailable, codes.ResourceExhausted:
		return c.String()
	}
	return ""
}
