package admission_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// serviceTimes is an in-memory ServiceRecorder and CompletionEstimator:
// per route, the completed durations recorded, and an estimate that is
// their empirical distribution (the share at or below the lease), answered
// from minSamples on. package learn's is the real one; this one is exact,
// so that the tests can state the rule's edges.
type serviceTimes struct {
	minSamples int

	mu  sync.Mutex
	got map[string][]time.Duration
	cut map[string][]time.Duration // EndedDeadline records
}

func (s *serviceTimes) Record(route string, ended deadline.EndedBy, d time.Duration, _ time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.got == nil {
		s.got, s.cut = map[string][]time.Duration{}, map[string][]time.Duration{}
	}
	switch ended {
	case deadline.EndedCompleted:
		s.got[route] = append(s.got[route], d)
	case deadline.EndedDeadline:
		s.cut[route] = append(s.cut[route], d)
	}
}

func (s *serviceTimes) Completion(route string, lease time.Duration) (deadline.Estimate, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ds := s.got[route]
	if len(ds) == 0 || len(ds) < s.minSamples {
		return deadline.Estimate{}, false
	}
	n := 0
	for _, d := range ds {
		if d <= lease {
			n++
		}
	}
	return deadline.Estimate{P: float64(n) / float64(len(ds)), Samples: uint64(len(ds))}, true
}

func (s *serviceTimes) records(route string) (got, cut []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got[route]), slices.Clone(s.cut[route])
}

// learned returns service times of route: n calls of 100ms, 10 of 200ms.
func learned(route string, n int) *serviceTimes {
	s := &serviceTimes{minSamples: 20}
	for range n {
		s.Record(route, deadline.EndedCompleted, 100*time.Millisecond, time.Time{})
	}
	for range 10 {
		s.Record(route, deadline.EndedCompleted, 200*time.Millisecond, time.Time{})
	}
	return s
}

func TestAdmitterLearned(t *testing.T) {
	const route = "GET /items"
	tests := []struct {
		name    string
		route   string
		n       int // calls of 100ms recorded (plus 10 of 200ms)
		budget  time.Duration
		min     uint64
		thresh  float64 // 0: 0.05
		refusal admission.Refusal
		learned bool
		p       float64
	}{
		{"below what the route needs: refused", route, 90, 50 * time.Millisecond, 0, 0, admission.RefusalLearned, true, 0},
		{"just below: refused", route, 90, 100*time.Millisecond - 1, 0, 0, admission.RefusalLearned, true, 0},
		{"at what it needs: admitted", route, 90, 100 * time.Millisecond, 0, 0, admission.RefusalNone, true, 0.9},
		{"between the two: admitted", route, 90, 150 * time.Millisecond, 0, 0, admission.RefusalNone, true, 0.9},
		{"90% is below a 95% threshold", route, 90, 150 * time.Millisecond, 0, 0.95, admission.RefusalLearned, true, 0.9},
		{"too few samples: as without it", route, 5, 50 * time.Millisecond, 0, 0, admission.RefusalNone, false, 0},
		{"fewer than MinSamples: as without it", route, 90, 50 * time.Millisecond, 1000, 0, admission.RefusalNone, false, 0},
		{"another route has no estimate", "GET /other", 90, 50 * time.Millisecond, 0, 0, admission.RefusalNone, false, 0},
		{"an unnamed route is not learned", "", 90, 50 * time.Millisecond, 0, 0, admission.RefusalNone, false, 0},
		{"the floor refuses first", route, 90, 10 * time.Millisecond, 0, 0, admission.RefusalFloor, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := learned(route, tt.n)
				if tt.thresh == 0 {
					tt.thresh = 0.05
				}
				g, err := admission.NewAdmitter(admission.Config{
					Limits:  admission.Limits{MaxBudget: time.Second, Floor: 10 * time.Millisecond},
					Learned: &admission.Learned{Recorder: st, Estimator: st, Threshold: tt.thresh, MinSamples: tt.min},
				})
				require.NoError(t, err)
				a, tk := g.Admit(t.Context(), tt.route, admission.Inbound{Present: true, Budget: tt.budget}, deadline.Deadline{})
				assert.Equal(t, tt.refusal, a.Refusal, "refusal %s", a.Refusal)
				assert.Equal(t, tt.learned, a.Learned)
				assert.InDelta(t, tt.p, a.Estimate.P, 1e-9)
				assert.Equal(t, tt.budget, a.Budget)
				assert.False(t, a.Probe)
				tk.Done(t.Context(), true)
			})
		})
	}
}

func TestAdmitterProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := learned("r", 90)
		g, err := admission.NewAdmitter(admission.Config{
			Limits:  admission.Limits{MaxBudget: time.Second},
			Learned: &admission.Learned{Recorder: st, Estimator: st, Threshold: 0.05, ProbeShare: 1},
		})
		require.NoError(t, err)
		a, tk := g.Admit(t.Context(), "r", admission.Inbound{Present: true, Budget: 50 * time.Millisecond}, deadline.Deadline{})
		assert.Equal(t, admission.RefusalNone, a.Refusal)
		assert.True(t, a.Probe, "admitted as a probe")
		assert.True(t, a.Learned)
		time.Sleep(30 * time.Millisecond)
		tk.Done(t.Context(), true)
		got, _ := st.records("r")
		assert.Contains(t, got, 30*time.Millisecond, "a probe's service time is recorded like any other")
	})
}

// TestTicketRecords checks what an admitted call's Ticket records: the
// handler's duration, queue wait excluded; a call cut by its deadline as
// censored at the budget it had when it started; nothing for a canceled
// call or a panic; once.
func TestTicketRecords(t *testing.T) {
	newAdmitter := func(t *testing.T, st *serviceTimes) *admission.Admitter {
		q, err := admission.NewQueue(1, 10)
		require.NoError(t, err)
		g, err := admission.NewAdmitter(admission.Config{
			Limits: admission.Limits{MaxBudget: time.Second}, Limiter: q,
			Learned: &admission.Learned{Recorder: st, Estimator: st, Threshold: 0.05},
		})
		require.NoError(t, err)
		return g
	}
	in := admission.Inbound{Present: true, Budget: 500 * time.Millisecond}

	t.Run("completed, after waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := &serviceTimes{}
			g := newAdmitter(t, st)
			_, first := g.Admit(t.Context(), "r", in, deadline.Deadline{})
			go func() {
				time.Sleep(40 * time.Millisecond)
				first.Done(t.Context(), true)
			}()
			a, tk := g.Admit(t.Context(), "r", in, deadline.Deadline{})
			require.False(t, a.Refused())
			assert.True(t, a.Queued)
			assert.Equal(t, 40*time.Millisecond, a.QueueWait)
			time.Sleep(25 * time.Millisecond)
			tk.Done(t.Context(), true)
			tk.Done(t.Context(), true) // once
			got, cut := st.records("r")
			assert.Equal(t, []time.Duration{40 * time.Millisecond, 25 * time.Millisecond}, got, "service times, the wait excluded")
			assert.Empty(t, cut)
		})
	})
	t.Run("cut by the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := &serviceTimes{}
			g := newAdmitter(t, st)
			a, tk := g.Admit(t.Context(), "r", in, deadline.Deadline{})
			ctx, cancel := a.Deadline.Scope(t.Context())
			defer cancel()
			time.Sleep(100 * time.Millisecond)
			<-ctx.Done() // a handler that returns only once its lease has ended
			tk.Done(ctx, true)
			got, cut := st.records("r")
			assert.Empty(t, got)
			assert.Equal(t, []time.Duration{500 * time.Millisecond}, cut, "censored at the budget it started with")
		})
	})
	t.Run("excluded time taken out", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := &serviceTimes{}
			g := newAdmitter(t, st)
			_, tk := g.Admit(t.Context(), "r", in, deadline.Deadline{})
			time.Sleep(300 * time.Millisecond)
			tk.Exclude(250 * time.Millisecond) // e.g. reading a slow body
			tk.Exclude(-time.Second)           // ignored
			tk.Done(t.Context(), true)
			a, tk := g.Admit(t.Context(), "r", in, deadline.Deadline{})
			ctx, cancel := a.Deadline.Scope(t.Context())
			defer cancel()
			<-ctx.Done()
			tk.Exclude(200 * time.Millisecond)
			tk.Done(ctx, true)
			got, cut := st.records("r")
			assert.Equal(t, []time.Duration{50 * time.Millisecond}, got)
			assert.Equal(t, []time.Duration{300 * time.Millisecond}, cut, "censored at what it worked: its budget less the excluded time")
		})
	})
	t.Run("canceled or panicked: not recorded, slot freed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := &serviceTimes{}
			g := newAdmitter(t, st)
			ctx, cancel := context.WithCancel(t.Context())
			_, tk := g.Admit(ctx, "r", in, deadline.Deadline{})
			cancel()
			tk.Done(ctx, true)
			_, tk = g.Admit(t.Context(), "r", in, deadline.Deadline{})
			tk.Done(t.Context(), false)
			got, cut := st.records("r")
			assert.Empty(t, got)
			assert.Empty(t, cut)
			a, tk := g.Admit(t.Context(), "r", in, deadline.Deadline{})
			assert.False(t, a.Queued, "both slots were freed")
			tk.Done(t.Context(), true)
		})
	})
}

func TestNewAdmitterErrors(t *testing.T) {
	st := &serviceTimes{}
	ok := admission.Learned{Recorder: st, Estimator: st, Threshold: 0.05}
	with := func(f func(*admission.Learned)) *admission.Learned {
		l := ok
		f(&l)
		return &l
	}
	tests := []struct {
		name  string
		c     admission.Config
		field string
	}{
		{"max 0", admission.Config{}, "WithMaxBudget"},
		{"floor < 0", admission.Config{Limits: admission.Limits{MaxBudget: time.Second, Floor: -1}}, "WithFloor"},
		{"floor = max", admission.Config{Limits: admission.Limits{MaxBudget: time.Second, Floor: time.Second}}, "WithFloor"},
		{"no recorder", admission.Config{Limits: admission.Limits{MaxBudget: time.Second}, Learned: with(func(l *admission.Learned) { l.Recorder = nil })}, "admission.Learned.Recorder"},
		{"no estimator", admission.Config{Limits: admission.Limits{MaxBudget: time.Second}, Learned: with(func(l *admission.Learned) { l.Estimator = nil })}, "admission.Learned.Estimator"},
		{"threshold 0", admission.Config{Limits: admission.Limits{MaxBudget: time.Second}, Learned: with(func(l *admission.Learned) { l.Threshold = 0 })}, "admission.Learned.Threshold"},
		{"threshold 1", admission.Config{Limits: admission.Limits{MaxBudget: time.Second}, Learned: with(func(l *admission.Learned) { l.Threshold = 1 })}, "admission.Learned.Threshold"},
		{"threshold NaN", admission.Config{Limits: admission.Limits{MaxBudget: time.Second}, Learned: with(func(l *admission.Learned) { l.Threshold = math.NaN() })}, "admission.Learned.Threshold"},
		{"probe share < 0", admission.Config{Limits: admission.Limits{MaxBudget: time.Second}, Learned: with(func(l *admission.Learned) { l.ProbeShare = -0.1 })}, "admission.Learned.ProbeShare"},
		{"probe share > 1", admission.Config{Limits: admission.Limits{MaxBudget: time.Second}, Learned: with(func(l *admission.Learned) { l.ProbeShare = 1.5 })}, "admission.Learned.ProbeShare"},
		{"probe share NaN", admission.Config{Limits: admission.Limits{MaxBudget: time.Second}, Learned: with(func(l *admission.Learned) { l.ProbeShare = math.NaN() })}, "admission.Learned.ProbeShare"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := admission.NewAdmitter(tt.c)
			assert.Nil(t, g)
			pe, isPE := errors.AsType[*deadline.PolicyError](err)
			require.True(t, isPE, "%v", err)
			assert.Equal(t, tt.field, pe.Field)
			assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
		})
	}
	g, err := admission.NewAdmitter(admission.Config{Limits: admission.Limits{MaxBudget: time.Second}, Learned: &ok})
	require.NoError(t, err)
	assert.NotNil(t, g)

	for _, lb := range [][2]int{{0, 1}, {-1, 1}, {1, -1}} {
		q, err := admission.NewQueue(lb[0], lb[1])
		assert.Nil(t, q)
		assert.ErrorIs(t, err, deadline.ErrInvalidPolicy, "limit %d, backlog %d", lb[0], lb[1])
	}
}

func TestRefusalNames(t *testing.T) {
	for r, want := range map[admission.Refusal]string{
		admission.RefusalNone: "none", admission.RefusalSpent: "spent", admission.RefusalFloor: "floor",
		admission.RefusalLearned: "learned", admission.RefusalQueueTimeout: "queue_timeout", admission.RefusalQueueFull: "queue_full",
		admission.Refusal(99): "unknown",
	} {
		assert.Equal(t, want, r.String())
	}
	assert.Equal(t, admission.Refusal(2), admission.RefusalFloor, "the numbering is kept")
	for _, r := range []admission.Refusal{admission.RefusalSpent, admission.RefusalFloor, admission.RefusalLearned, admission.RefusalQueueTimeout} {
		assert.True(t, r.Budget(), r.String())
	}
	for _, r := range []admission.Refusal{admission.RefusalNone, admission.RefusalQueueFull, admission.Refusal(99)} {
		assert.False(t, r.Budget(), r.String())
	}
}

// TestAdmitterProbesFollowARecoveringRoute checks, with package learn's
// estimator, that a route whose estimate refuses every budget its callers
// send notices that it became fast again only through probes: without
// them nothing new is recorded and it refuses for ever.
func TestAdmitterProbesFollowARecoveringRoute(t *testing.T) {
	for _, share := range []float64{0, 0.2} {
		t.Run(fmt.Sprint("probe share ", share), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &learn.Recorder{}
				live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 10 * time.Second, MinSamples: 20}, Every: 5, HalfLife: 20})
				require.NoError(t, err)
				for range 40 { // the route was slow
					rec.Record("r", deadline.EndedCompleted, 100*time.Millisecond, time.Now())
				}
				g, err := admission.NewAdmitter(admission.Config{Limits: admission.Limits{MaxBudget: time.Second},
					Learned: &admission.Learned{Recorder: rec, Estimator: live, Threshold: 0.05, ProbeShare: share}})
				require.NoError(t, err)
				recovered, probes := -1, 0
				for i := range 300 { // now it takes 10ms; callers send 50ms
					a, tk := g.Admit(t.Context(), "r", budget(50*time.Millisecond), deadline.Deadline{})
					if a.Refused() {
						require.Equal(t, admission.RefusalLearned, a.Refusal)
						continue
					}
					if a.Probe {
						probes++
					} else if recovered < 0 {
						recovered = i
					}
					time.Sleep(10 * time.Millisecond)
					tk.Done(t.Context(), true)
				}
				if share == 0 {
					assert.Equal(t, -1, recovered, "never: nothing new is recorded")
					assert.Zero(t, probes)
					return
				}
				assert.GreaterOrEqual(t, recovered, 0, "admitted again without being a probe")
				t.Logf("admitted again after %d requests, %d probes", recovered, probes)
			})
		})
	}
}
