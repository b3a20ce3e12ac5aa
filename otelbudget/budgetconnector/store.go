package budgetconnector

import (
	"time"
	"unsafe"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// sparse is one series of a histogram, bucket-exact with learn at
// learn.Scale: the kept buckets from offset on, grown on demand to the
// durations seen (not the sketch's whole range), plus the underflow and
// overflow buckets of learn.Series.
type sparse struct {
	under, over uint64
	offset      int32
	counts      []uint64
}

// add counts n durations in bucket index i (learn.BucketIndex), or in the
// underflow or overflow bucket.
func (s *sparse) add(d time.Duration, n uint64) {
	switch {
	case d <= learn.Underflow:
		s.under += n
		return
	case d > learn.Overflow:
		s.over += n
		return
	}
	s.addIndex(learn.BucketIndex(d), n)
}

// addIndex counts n in kept bucket i (learn.MinIndex <= i <= learn.MaxIndex).
func (s *sparse) addIndex(i int32, n uint64) {
	if len(s.counts) == 0 {
		s.offset = i
		if cap(s.counts) == 0 {
			s.counts = make([]uint64, 1, 8)
		} else {
			s.counts = s.counts[:1]
		}
		s.counts[0] += n
		return
	}
	switch {
	case i < s.offset:
		grow := int(s.offset - i)
		c := make([]uint64, len(s.counts)+grow, min(len(s.counts)+grow+grow/2, keptBuckets))
		copy(c[grow:], s.counts)
		s.counts, s.offset = c, i
	case int(i-s.offset) >= len(s.counts):
		need := int(i-s.offset) + 1
		if need <= cap(s.counts) {
			s.counts = s.counts[:need]
		} else {
			c := make([]uint64, need, min(need+need/2, keptBuckets))
			copy(c, s.counts)
			s.counts = c
		}
	}
	s.counts[i-s.offset] += n
}

// merge adds o's counts.
func (s *sparse) merge(o *sparse) {
	s.under += o.under
	s.over += o.over
	for k, c := range o.counts {
		if c != 0 {
			s.addIndex(o.offset+int32(k), c)
		}
	}
}

// reset empties s, keeping its memory for the next interval unless it is
// large (a delta spread over many buckets): then it is freed, so that the
// deltas of idle keys hold little.
func (s *sparse) reset() {
	if cap(s.counts) > keepBuckets {
		s.counts = nil
	} else {
		clear(s.counts)
		s.counts = s.counts[:0]
	}
	s.under, s.over, s.offset = 0, 0, 0
}

// keptBuckets is the number of learn's kept buckets: no series holds more
// (its capacity included), so one series takes at most 8 × keptBuckets
// bytes, 8.5 KiB.
const keptBuckets = learn.MaxIndex - learn.MinIndex + 1

// keepBuckets is the most buckets a reset series keeps allocated: 1 KiB.
const keepBuckets = 128

// series returns s as a learn.Series, trimmed (the slice is s's).
func (s *sparse) series() learn.Series {
	out := learn.Series{Underflow: s.under, Overflow: s.over}
	lo, hi := 0, len(s.counts)
	for lo < hi && s.counts[lo] == 0 {
		lo++
	}
	for hi > lo && s.counts[hi-1] == 0 {
		hi--
	}
	if lo < hi {
		out.Offset, out.Counts = s.offset+int32(lo), s.counts[lo:hi]
	}
	return out
}

// hist is one key's attempts: the learn.Histogram of a step, sparse.
type hist struct {
	completed, censored               sparse
	successes, errors, timeouts, cuts uint64
	max, maxCensored                  time.Duration
	first, last                       int64 // unix ms of the first and the last sample's end; 0: none
}

// add records one sample: learn.Histogram.Add's rule on sparse series.
func (h *hist) add(ended deadline.EndedBy, d time.Duration, at time.Time) {
	switch ended {
	case deadline.EndedCompleted:
		h.successes++
	case deadline.EndedError:
		h.errors++
	case deadline.EndedAttemptTimeout:
		h.timeouts++
	case deadline.EndedDeadline:
		h.cuts++
	default:
		return
	}
	d = max(d, 0)
	if ended == deadline.EndedCompleted || ended == deadline.EndedError {
		h.completed.add(d, 1)
		h.max = max(h.max, d)
	} else {
		h.censored.add(d, 1)
		h.maxCensored = max(h.maxCensored, d)
	}
	h.window(at.UnixMilli(), at.UnixMilli())
}

// window widens h's window to [first, last] (unix ms).
func (h *hist) window(first, last int64) {
	if h.first == 0 || first < h.first {
		h.first = first
	}
	if last > h.last {
		h.last = last
	}
}

func (h *hist) samples() uint64 { return h.successes + h.errors + h.timeouts + h.cuts }

func (h *hist) reset() {
	h.completed.reset()
	h.censored.reset()
	h.successes, h.errors, h.timeouts, h.cuts = 0, 0, 0, 0
	h.max, h.maxCensored, h.first, h.last = 0, 0, 0, 0
}

// histogram fills dst with h as a learn.Histogram, through SetSeries: it
// fails (an *learn.OptionError) when the parts of h do not add up, as when
// a merge tier has received a point's histograms but not yet its counts.
func (h *hist) histogram(dst *learn.Histogram) error {
	*dst = learn.Histogram{
		Samples: h.samples(), Successes: h.successes, CeilingTimeouts: h.timeouts, DeadlineCuts: h.cuts,
		Max: h.max, MaxCensored: h.maxCensored,
	}
	if h.first != 0 {
		dst.First, dst.Last = time.UnixMilli(h.first).UTC(), time.UnixMilli(h.last).UTC()
	}
	return dst.SetSeries(h.completed.series(), h.censored.series())
}

// merge adds o to h: learn.Histogram.Merge's rule on sparse series.
func (h *hist) merge(o *hist) {
	h.completed.merge(&o.completed)
	h.censored.merge(&o.censored)
	h.successes += o.successes
	h.errors += o.errors
	h.timeouts += o.timeouts
	h.cuts += o.cuts
	h.max = max(h.max, o.max)
	h.maxCensored = max(h.maxCensored, o.maxCensored)
	if o.first != 0 {
		h.window(o.first, o.last)
	}
}

// key is what the connector keeps histograms by.
type key struct{ service, step string }

// entry is one key's data: what arrived since the last export (pending,
// the delta exported; ingestion writes only it, under the connector's
// lock), and its window, a ring of windowSlots slots (ring[store.cur] is
// the slot being filled) that only the export writes (under its own lock:
// it adds each delta to the current slot, without the ingestion lock); in
// a list from the most recently updated to the least.
type entry struct {
	key        key
	pending    hist
	ring       [windowSlots]hist
	prev, next *entry
}

// maxEntryBytes bounds one key's memory but for its two names: the entry,
// its 4 slots and its pending delta, each two series of at most
// keptBuckets buckets (8 704 bytes, which Go's allocator serves from its
// 9 472-byte size class), and its slot in the store's map (about 100
// bytes, counted as 1 KiB). About 95 KiB.
const maxEntryBytes = int(unsafe.Sizeof(entry{})) + (windowSlots+1)*2*maxSeriesBytes + 1024

// maxSeriesBytes is the most one series' buckets take on the heap:
// 8 × keptBuckets rounded up to Go's size class.
const maxSeriesBytes = 9472

// windowSlots is the number of slots a window is kept in: the oldest slot
// is dropped whole, so a suggestion rests on between (windowSlots-1)/windowSlots
// of the window and the whole of it.
const windowSlots = 4

// add records one sample in the key's delta.
func (e *entry) add(ended deadline.EndedBy, d time.Duration, at time.Time) {
	e.pending.add(ended, d, at)
}

// windowSamples is the number of attempts in the key's window (the
// export's lock held).
func (e *entry) windowSamples() uint64 {
	var n uint64
	for i := range e.ring {
		n += e.ring[i].samples()
	}
	return n
}

// sum fills dst with the key's window and its delta: what the next export
// will see before it rotates (both locks held).
func (e *entry) sum(dst *hist) {
	dst.reset()
	dst.merge(&e.pending)
	for i := range e.ring {
		dst.merge(&e.ring[i])
	}
}

// store holds the entries, at most max of them: a new key past that
// evicts the least recently updated one. Not safe for concurrent use.
type store struct {
	max     int
	entries map[key]*entry
	head    *entry // most recently updated; head.prev is the least
	cur     int    // the ring slot being filled
	evicted uint64
	expired uint64
}

func newStore(maxKeys int) *store {
	return &store{max: maxKeys, entries: map[key]*entry{}}
}

// rotate starts the next slot of every key's window, dropping the oldest
// one; a key left with nothing in its window and no delta to export is
// forgotten (counted in expired).
func (s *store) rotate() {
	s.cur = (s.cur + 1) % windowSlots
	for k, e := range s.entries {
		e.ring[s.cur].reset()
		if e.pending.samples() == 0 && e.windowSamples() == 0 {
			s.unlink(e)
			delete(s.entries, k)
			s.expired++
		}
	}
}

// get returns k's entry, created (evicting the least recently updated
// entry when full) and moved to the front.
func (s *store) get(k key) *entry {
	e := s.entries[k]
	if e == nil {
		if len(s.entries) >= s.max {
			s.evict()
		}
		e = &entry{key: k}
		s.entries[k] = e
	} else if e == s.head {
		return e
	} else {
		s.unlink(e)
	}
	s.pushFront(e)
	return e
}

func (s *store) pushFront(e *entry) {
	if s.head == nil {
		e.prev, e.next = e, e
	} else {
		e.next, e.prev = s.head, s.head.prev
		s.head.prev.next = e
		s.head.prev = e
	}
	s.head = e
}

func (s *store) unlink(e *entry) {
	if e.next == e {
		s.head = nil
	} else {
		e.prev.next, e.next.prev = e.next, e.prev
		if s.head == e {
			s.head = e.next
		}
	}
	e.prev, e.next = nil, nil
}

func (s *store) evict() {
	if s.head == nil {
		return
	}
	last := s.head.prev
	s.unlink(last)
	delete(s.entries, last.key)
	s.evicted++
}
