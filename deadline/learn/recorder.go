package learn

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/deadlinebudget/budget/deadline"
)

// MaxSteps is the number of step names a [Recorder] keeps a series for.
// Attempts of any further step are recorded together in one overflow series
// ([Snapshot.Overflow]), so that a step name built from unbounded input
// cannot grow the memory.
const MaxSteps = 256

// Recorder records, per step, how long attempts took, in a fixed-memory
// sketch ([Scale]): the attempts that completed (with or without an error
// returned before any limit) and the ones a limit cut, censored at the
// point they were cut. Canceled and panicked attempts are not recorded.
//
// Feed it with [Recorder.Hooks]; read it with [Recorder.Snapshot] and
// [Recorder.Suggest]. The zero Recorder is empty and ready to use. It is
// safe for concurrent use: recording takes no lock and does not allocate
// once the step's series exists (atomic counters; a series is created once
// per step, under a lock). Goroutines recording the same step on different
// cores mostly write different copies of its per-outcome counters (8, one
// cache line each), so they seldom contend for a line. Each series takes
// about 9.1 KiB.
type Recorder struct {
	mu       sync.Mutex                         // serialises series creation
	steps    atomic.Pointer[map[string]*series] // copy-on-write
	full     atomic.Bool                        // MaxSteps series exist
	overflow atomic.Pointer[series]
	live     atomic.Pointer[liveConfig]
}

// series is one step's atomic histogram. Its fields are laid out by how
// they are shared between the cores that record the step at once: the
// read-mostly fields on a cache line of their own, the per-outcome
// counters (written on every recording) in padded shards, then the buckets,
// which collide only when two cores record durations in the same bucket.
// A series is 64-byte aligned in practice (its size class, 9472 bytes, is a
// multiple of 64), so that each group starts a line.
type series struct {
	readMostly
	_ [cacheLine - unsafe.Sizeof(readMostly{})%cacheLine]byte

	kinds               [shards]kindCounts
	completed, censored [slots]atomic.Uint32
}

// readMostly is the part of a series that recording reads every time but
// writes rarely: once per step, once per millisecond at most, when a
// duration exceeds the longest so far, or (live mode) every Every samples.
type readMostly struct {
	first, last      atomic.Int64 // Unix nanoseconds, to the millisecond; 0: none
	max, maxCensored atomic.Int64

	// Live mode (see live.go).
	recent   atomic.Pointer[recent]
	ceiling  atomic.Int64 // the live ceiling; 0: none
	updating atomic.Bool  // an update of the ceiling runs
	stale    atomic.Bool  // an update is due (every Every samples)
}

const (
	// cacheLine is the size of a cache line on the usual 64-bit CPUs.
	cacheLine = 64
	// shards is the number of copies of a series' per-outcome counters.
	// Eight make two cores recording at once collide on one in 1/8 of
	// their recordings, for 512 bytes a series.
	shardBits = 3
	shards    = 1 << shardBits
)

// kindCounts is one shard of a series' per-outcome counters, alone on its
// cache line. A recording adds to one shard; readers sum them.
type kindCounts struct {
	successes, timeouts, cuts atomic.Uint64
	_                         [cacheLine - 3*8]byte
}

// shard picks the shard of the counters a recording adds to, from an
// address on the stack of the goroutine that records (sp). It has to be
// stable for a goroutine, not merely spread: with a shard picked at random
// per recording, the line a core writes was last written by the other core
// half of the time, and moving it costs as much as the contention the shards
// are there to avoid. A goroutine's stack is its own, and the runtime hands
// a finished goroutine's stack to the next one started on the same P, so
// the goroutines of a core tend to keep to one shard and its line stays in
// that core's cache. Stacks are 8 KiB or more, so the address is hashed from
// the 8 KiB block it is in (Fibonacci hashing, which spreads consecutive
// blocks over every shard). When the runtime moves a stack (to grow or
// shrink it), the goroutine changes shard: readers sum them all.
func shard(sp uintptr) int {
	return int(uint64(sp>>13) * 0x9e3779b97f4a7c15 >> (64 - shardBits))
}

// Hooks returns hooks that record every attempt of every call they
// observe. Install them on a policy ([deadline.Policy.Hooks]), a context
// ([deadline.WithHooks]), or compose them with others ([deadline.Compose]).
// Only AttemptEnd is set.
func (r *Recorder) Hooks() *deadline.Hooks {
	return &deadline.Hooks{AttemptEnd: r.attemptEnd}
}

func (r *Recorder) attemptEnd(_ context.Context, a deadline.AttemptInfo, res deadline.AttemptResult) {
	d := res.Duration
	if res.EndedBy == deadline.EndedAttemptTimeout || res.EndedBy == deadline.EndedDeadline {
		// Cut by a limit: all that is known is that it would have taken
		// longer than it was granted.
		d = a.Granted
	}
	// Start.UnixNano() + Duration is Start.Add(Duration).UnixNano(), without
	// the monotonic reading that Add also moves.
	r.record(a.Name, res.EndedBy, d, a.Start.UnixNano()+int64(res.Duration))
}

// Record records one attempt of step, as [Histogram.Add] describes: d is
// the duration of a completed attempt ([deadline.EndedCompleted],
// [deadline.EndedError]) or the grant a cut one was cut at
// ([deadline.EndedAttemptTimeout], [deadline.EndedDeadline]); other
// outcomes are ignored. at is when the attempt ended.
func (r *Recorder) Record(step string, ended deadline.EndedBy, d time.Duration, at time.Time) {
	r.record(step, ended, d, at.UnixNano())
}

func (r *Recorder) record(step string, ended deadline.EndedBy, d time.Duration, at int64) {
	censored := false
	switch ended {
	case deadline.EndedCompleted, deadline.EndedError:
	case deadline.EndedAttemptTimeout, deadline.EndedDeadline:
		censored = true
	default:
		return
	}
	d = max(d, 0)
	s := r.series(step)
	s.add(ended, d, at)
	if lc := r.live.Load(); lc != nil {
		lc.record(s, ended, censored, d)
	}
}

func (s *series) add(ended deadline.EndedBy, d time.Duration, at int64) {
	var onStack byte
	switch k := &s.kinds[shard(uintptr(unsafe.Pointer(&onStack)))]; ended {
	case deadline.EndedCompleted:
		k.successes.Add(1)
	case deadline.EndedAttemptTimeout:
		k.timeouts.Add(1)
	case deadline.EndedDeadline:
		k.cuts.Add(1)
	}
	if ended == deadline.EndedCompleted || ended == deadline.EndedError {
		inc(&s.completed[slot(d)])
		raise(&s.max, int64(d))
	} else {
		inc(&s.censored[slot(d)])
		raise(&s.maxCensored, int64(d))
	}
	// Kept to the millisecond, the first is set once and rarely lowered,
	// the last raised once per millisecond at most: both are a load in the
	// common case.
	at -= at % int64(time.Millisecond)
	if f := s.first.Load(); f == 0 || at < f {
		for !s.first.CompareAndSwap(f, at) {
			if f = s.first.Load(); f != 0 && f <= at {
				break
			}
		}
	}
	raise(&s.last, at)
}

// inc adds one to c, saturating at the largest uint32 rather than wrapping.
func inc(c *atomic.Uint32) {
	for {
		v := c.Load()
		if v == math.MaxUint32 || c.CompareAndSwap(v, v+1) {
			return
		}
	}
}

// raise sets m to v if v is larger.
func raise(m *atomic.Int64, v int64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}

// series returns step's series, creating it (or, past MaxSteps, using the
// overflow series) on first use.
func (r *Recorder) series(step string) *series {
	if m := r.steps.Load(); m != nil {
		if s, ok := (*m)[step]; ok {
			return s
		}
	}
	if r.full.Load() {
		return r.overflow.Load()
	}
	return r.addSeries(step)
}

// lookup returns step's series, or nil.
func (r *Recorder) lookup(step string) *series {
	if m := r.steps.Load(); m != nil {
		return (*m)[step]
	}
	return nil
}

func (r *Recorder) addSeries(step string) *series {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.steps.Load()
	if old != nil {
		if s, ok := (*old)[step]; ok {
			return s
		}
	}
	if old != nil && len(*old) >= MaxSteps {
		if r.overflow.Load() == nil {
			r.overflow.Store(new(series))
		}
		r.full.Store(true)
		return r.overflow.Load()
	}
	m := make(map[string]*series, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	s := new(series)
	m[step] = s
	r.steps.Store(&m)
	return s
}

func lenOf(m *map[string]*series) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// Snapshot is a copy of a [Recorder]'s series: per step, and the overflow
// series of the steps past [MaxSteps]. Snapshots merge ([Snapshot.Merge]),
// so that the recorders of many processes can be combined.
type Snapshot struct {
	Steps    map[string]*Histogram
	Overflow *Histogram // nil when no step overflowed
}

// Snapshot copies the recorder's counts. Attempts recorded while it copies
// may be partly included: each counter is read once, atomically.
func (r *Recorder) Snapshot() *Snapshot {
	snap := &Snapshot{Steps: map[string]*Histogram{}}
	if m := r.steps.Load(); m != nil {
		for k, s := range *m {
			snap.Steps[k] = s.histogram()
		}
	}
	if o := r.overflow.Load(); o != nil {
		snap.Overflow = o.histogram()
	}
	return snap
}

// Merge adds o's histograms to s, step by step. A nil o is ignored.
func (s *Snapshot) Merge(o *Snapshot) {
	if o == nil {
		return
	}
	if s.Steps == nil {
		s.Steps = map[string]*Histogram{}
	}
	for k, h := range o.Steps {
		if s.Steps[k] == nil {
			s.Steps[k] = &Histogram{}
		}
		s.Steps[k].Merge(h)
	}
	if o.Overflow != nil {
		if s.Overflow == nil {
			s.Overflow = &Histogram{}
		}
		s.Overflow.Merge(o.Overflow)
	}
}

// Merge adds a snapshot (another process's, say) into r, as if its attempts
// had been recorded here; its overflow goes to r's overflow series. The
// live ceilings are not recomputed by it.
func (r *Recorder) Merge(snap *Snapshot) {
	if snap == nil {
		return
	}
	for k, h := range snap.Steps {
		r.series(k).merge(h)
	}
	if snap.Overflow != nil && snap.Overflow.Samples > 0 {
		r.mu.Lock()
		if r.overflow.Load() == nil {
			r.overflow.Store(new(series))
		}
		r.mu.Unlock()
		r.overflow.Load().merge(snap.Overflow)
	}
}

func (s *series) histogram() *Histogram {
	h := &Histogram{Max: time.Duration(s.max.Load()), MaxCensored: time.Duration(s.maxCensored.Load())}
	for i := range s.kinds {
		k := &s.kinds[i]
		h.Successes += k.successes.Load()
		h.CeilingTimeouts += k.timeouts.Load()
		h.DeadlineCuts += k.cuts.Load()
	}
	for i := range h.completed {
		h.completed[i] = uint64(s.completed[i].Load())
		h.censored[i] = uint64(s.censored[i].Load())
	}
	// Samples is the sum of the buckets, and is at least the sum of the
	// kinds, so that Errors never goes negative under concurrent recording.
	for i := range h.completed {
		h.Samples += h.completed[i] + h.censored[i]
	}
	h.Samples = max(h.Samples, h.Successes+h.CeilingTimeouts+h.DeadlineCuts)
	if f := s.first.Load(); f != 0 {
		h.First = time.Unix(0, f)
	}
	if l := s.last.Load(); l != 0 {
		h.Last = time.Unix(0, l)
	}
	return h
}

func (s *series) merge(h *Histogram) {
	if h == nil || h.Samples == 0 {
		return
	}
	k := &s.kinds[0] // readers sum the shards: any one will do
	k.successes.Add(h.Successes)
	k.timeouts.Add(h.CeilingTimeouts)
	k.cuts.Add(h.DeadlineCuts)
	for i := range h.completed {
		addSat(&s.completed[i], h.completed[i])
		addSat(&s.censored[i], h.censored[i])
	}
	raise(&s.max, int64(h.Max))
	raise(&s.maxCensored, int64(h.MaxCensored))
	if !h.First.IsZero() {
		f := h.First.UnixNano()
		for {
			cur := s.first.Load()
			if cur != 0 && cur <= f || s.first.CompareAndSwap(cur, f) {
				break
			}
		}
		raise(&s.last, h.Last.UnixNano())
	}
}

// addSat adds n to c, saturating at the largest uint32.
func addSat(c *atomic.Uint32, n uint64) {
	if n == 0 {
		return
	}
	for {
		v := c.Load()
		nv := uint64(v) + n
		if nv > math.MaxUint32 {
			nv = math.MaxUint32
		}
		if c.CompareAndSwap(v, uint32(nv)) {
			return
		}
	}
}

func (s *series) completedAt(i int) uint64 { return uint64(s.completed[i].Load()) }
func (s *series) censoredAt(i int) uint64  { return uint64(s.censored[i].Load()) }

// Steps returns the names of the steps recorded, in no particular order.
func (r *Recorder) Steps() []string {
	m := r.steps.Load()
	if m == nil {
		return nil
	}
	names := make([]string, 0, len(*m))
	for k := range *m {
		names = append(names, k)
	}
	return names
}

// Suggest derives a ceiling for step from its recorded attempts (see
// [Suggest] for the maths and [SuggestOptions] for the defaults). It fails
// with an [*OptionError] on invalid options, an error matching
// [ErrUnknownStep] when step was never recorded (or overflowed),
// a [*NotEnoughSamplesError] below SuggestOptions.MinSamples, and a
// [*CensoredError] when too many attempts were cut to know the quantile;
// with the last two, the Suggestion still carries the counts (and
// RaiseAbove).
func (r *Recorder) Suggest(step string, o SuggestOptions) (Suggestion, error) {
	if _, err := o.withDefaults(); err != nil {
		return Suggestion{Step: step}, err
	}
	s := r.lookup(step)
	if s == nil {
		return Suggestion{Step: step}, fmt.Errorf("%w %q (%d steps recorded)", ErrUnknownStep, step, len(r.Steps()))
	}
	return Suggest(step, s.histogram(), o)
}
