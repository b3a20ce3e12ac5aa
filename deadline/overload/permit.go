package overload

import "time"

// Permit is a call's slot in a [Limiter], from [Limiter.Acquire] or
// [Limiter.TryAcquire] until [Permit.Done]. The zero Permit holds nothing.
// A Permit is a value and may be copied: the slot is freed once, by the
// first Done of any copy; the others do nothing (while the limiter holds
// fewer than 4 096 permits at once; beyond, a new permit's copies are not
// told apart).
type Permit struct {
	l     *Limiter
	route string
	start time.Time
	// Ceiling, for a probe, is the most it may run.
	Ceiling time.Duration
	// Waited is how long the call waited in the queue.
	Waited time.Duration
	// excluded is time inside the call that is not service time.
	excluded time.Duration
	// grant is the permit's grant in the limiter's table: the word it
	// holds there (generation<<1 | held) << grantBits | its index+1; 0:
	// none. The first Done of any copy ends it.
	grant uint64
	// Probe reports that the call goes out as the breaker's half-open
	// probe ([Breaker]); Ceiling is then the most it may run.
	Probe bool
	// Queued reports that the call waited in the queue (Waited).
	Queued bool
}

// maxGrants bounds a limiter's table of grants; grantBits hold an index+1
// of it in a Permit's grant, the rest the grant's word (its generation
// truncated to 50 bits: a slot granted 2⁵⁰ times would not be freed).
const (
	maxGrants = 1 << 12
	grantBits = 13
)

// grant gives p a grant of its own in the table, which its copies share:
// the first Done of any of them ends it, and the others find its
// generation moved on and do nothing. A few slots are tried; with every
// tried slot held (more permits held than the table has
// room for) p goes without one, and only its own Done is guarded.
func (l *Limiter) grant(p Permit) Permit {
	p.grant = l.grantAt(uint64(l.inflight.Load()))
	return p
}

// grantAt is grant, trying the slots from the hint on: the calls in flight
// when the slot was taken, which spreads the permits held at once over the
// table without a counter of its own to contend on. It returns the
// permit's grant, 0 for none.
func (l *Limiter) grantAt(hint uint64) uint64 {
	n := uint64(len(l.grants))
	if n == 0 {
		return 0 // a Limiter not built by NewLimiter
	}
	for k := range uint64(4) {
		i := (hint + k) & (n - 1)
		g := &l.grants[i]
		if w := g.Load(); w&1 == 0 && g.CompareAndSwap(w, w|1) {
			return (w|1)<<grantBits | (i + 1)
		}
	}
	return 0
}

// release ends p's grant, reporting false when a copy of p ended it first.
func (p *Permit) release() bool {
	if p.grant == 0 {
		return true
	}
	w := p.grant >> grantBits // generation<<1 | held
	return p.l.grants[p.grant&(1<<grantBits-1)-1].CompareAndSwap(w, w+1)
}

// Exclude takes d out of the latency [Permit.Done] teaches the limit: time
// the call spent waiting on its own caller rather than on the work, such
// as a server's reads of a body the client sends slowly or its writes to a
// client that reads slowly (package admission's Ticket.Exclude passes it
// on). What one client controls must not teach the limit that the work is
// slow. d <= 0 does nothing, and so does Exclude on the zero Permit or
// after Done.
func (p *Permit) Exclude(d time.Duration) {
	if d > 0 && p.l != nil {
		p.excluded += d
	}
}

// Done frees the permit's slot, handing it to a waiting call that can still
// start, and teaches the limit and the breaker how the call ended. Calls
// after the first, and Done on the zero Permit, do nothing.
//
// The limit learns only service time, from [OutcomeSuccess] and
// [OutcomeFailure]: the call's latency. [OutcomeCut] and [OutcomeTimeout]
// are censored: the call's latency is known only to exceed what it ran,
// which says the downstream queued it when that already exceeds the
// route's baseline by more than the tolerance, and nothing otherwise. The
// other outcomes teach the limit nothing: no service time was given (an
// overload answer comes before the work it refuses; learned as the route's
// latency it would make every served call look queued). deadline.Do keeps
// every error answer out of the latency ([OutcomeError],
// [OutcomeAnswered]), whatever the breaker counts it as. See [Outcome] for
// what each teaches the breaker.
func (p *Permit) Done(o Outcome) {
	l := p.l
	if l == nil {
		return
	}
	first := p.release()
	p.l = nil
	if !first {
		return // a copy of p was Done first
	}
	// The slot is freed before the queue is looked at, and a waiting call
	// is queued before it looks at the slots again (Acquire): one of the
	// two always sees the other, so no slot stays free while a call waits.
	l.inflight.Add(-1)
	if l.breaker != nil {
		l.breaker.record(p.Probe, o, time.Now())
	}
	if !l.fixed {
		now := time.Now()
		if o == OutcomeOverload {
			l.overloadAt.Store(int64(now.Sub(l.origin)) + 1)
		}
		l.mu.Lock()
		l.learn(p, o, now)
		l.fill(now)
		l.mu.Unlock()
		return
	}
	if l.queued.Load() > 0 {
		l.mu.Lock()
		l.fill(time.Now())
		l.mu.Unlock()
	}
}
