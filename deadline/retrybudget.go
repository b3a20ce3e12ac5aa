package deadline

import (
	"math"
	"sync/atomic"
	"time"
)

// The retry budget's defaults, used when [NewRetryBudget] is given no
// option for them: Finagle's and Envoy's settings.
const (
	DefaultRetryRatio   = 0.2              // retries ≤ 20 % of first attempts …
	DefaultRetryWindow  = 10 * time.Second // … counted over the last 10 s …
	DefaultMinRetryRate = 10.0             // … plus 10 retries per second of window
)

// retryBuckets is the number of time buckets the window is divided into:
// counts leave the window one bucket (a tenth of it) at a time.
const retryBuckets = 10

// RetryBudget bounds the retries of many calls together, so that a fleet of
// callers does not multiply the load on a downstream that is failing: in
// any window of time, retries ≤ ratio × first attempts + minRate × window.
// Build one per downstream with [NewRetryBudget] and share it between every
// [Policy] that calls that downstream ([Policy.RetryBudget]).
//
// Every first attempt is a deposit and is always allowed. Every retry asks
// the budget and takes one token if the balance, ratio × the first attempts
// of the window plus the floor minRate × window, less the retries already
// taken in it, is at least one; otherwise the retry is denied and the call
// stops with [ReasonRetryBudget]. Counts older than the window expire a
// tenth of the window at a time (a sliding window of ten buckets, on the
// monotonic clock, measured from the budget's construction).
//
// A RetryBudget is safe for concurrent use by any number of goroutines and
// takes no lock: each bucket is a pair of atomic words, and a deposit is a
// clock read and a compare-and-swap, with no allocation. Two retries asked
// at the same instant never both take the last token (a withdrawal that
// overdraws is returned); under contention a retry may be denied although a
// token was freed at that same instant. A count saturates at 2³²−1 per
// bucket.
//
// The zero RetryBudget is not usable: a [Policy] holding one is invalid.
// Build it inside a testing/synctest bubble to run it on the bubble's
// clock.
type RetryBudget struct {
	ratio   float64
	reserve float64 // minRate × window, in retries
	window  time.Duration
	bucket  time.Duration // window / retryBuckets
	origin  time.Time     // the monotonic origin of bucket numbers

	deposits    [retryBuckets]atomic.Uint64 // epoch<<32 | count
	withdrawals [retryBuckets]atomic.Uint64

	// Client-side throttling (WithThrottle): K, and the attempts asked
	// for and accepted by the downstream in the same window.
	k        float64
	requests [retryBuckets]atomic.Uint64
	accepts  [retryBuckets]atomic.Uint64
}

// RetryBudgetOption configures a [RetryBudget] built by [NewRetryBudget].
type RetryBudgetOption interface{ apply(*RetryBudget) error }

type retryBudgetOption func(*RetryBudget) error

func (f retryBudgetOption) apply(b *RetryBudget) error { return f(b) }

// WithRetryRatio sets the share of first attempts that may be retried, in
// [0, 1]: 0.2 (the default) allows one retry per five first attempts, 0
// allows only the minimum rate. Anything else, NaN included, makes
// [NewRetryBudget] return a [*PolicyError].
func WithRetryRatio(ratio float64) RetryBudgetOption {
	return retryBudgetOption(func(b *RetryBudget) error {
		if !(ratio >= 0 && ratio <= 1) {
			return &PolicyError{"deadline.WithRetryRatio", ratio, "in [0, 1] (e.g. 0.2: retries ≤ 20 % of first attempts)"}
		}
		b.ratio = ratio
		return nil
	})
}

// WithRetryWindow sets the sliding window over which first attempts and
// retries are counted (default 10s). A window <= 0 makes [NewRetryBudget]
// return a [*PolicyError].
func WithRetryWindow(window time.Duration) RetryBudgetOption {
	return retryBudgetOption(func(b *RetryBudget) error {
		if window <= 0 {
			return &PolicyError{"deadline.WithRetryWindow", window, "> 0"}
		}
		b.window = window
		return nil
	})
}

// WithMinRetryRate sets the retries per second allowed whatever the ratio
// (default 10), so that a budget with little traffic can still retry: the
// window holds perSecond × window seconds of them, available in a burst. 0
// allows only the ratio. A negative, infinite or NaN rate makes
// [NewRetryBudget] return a [*PolicyError].
func WithMinRetryRate(perSecond float64) RetryBudgetOption {
	return retryBudgetOption(func(b *RetryBudget) error {
		if !(perSecond >= 0 && perSecond <= math.MaxFloat64) {
			return &PolicyError{"deadline.WithMinRetryRate", perSecond, ">= 0 and finite (retries per second)"}
		}
		b.reserve = perSecond // scaled by the window below
		return nil
	})
}

// WithThrottle adds client-side throttling, the form of Google's SRE book
// ("Handling Overload", 2016), to the budget: every attempt, first, retry or
// hedge, is counted as a request in the same window as the retries when it
// ends (one its caller canceled, or a hedge that lost, is not counted), and
// every attempt the downstream accepted (it answered, with anything but an
// overload answer, [ErrOverloaded], before the attempt was cut) as an
// accept; before an attempt goes out it is dropped on the client with
// probability max(0, (requests − k × accepts) / (requests + 1)), and the
// call stops with [ReasonThrottled]. A dropped attempt counts as a request
// too, so the drop rate follows the downstream's own refusal rate. An
// overload charge ([RetryBudget.Charge]) counts its n tokens as n refused
// requests as well: one overload answer draws both the retries and the
// first attempts down, in one accounting. An attempt answered with a shed
// from the server's standing queue ([Shed]) is not counted at all.
//
// k is in [1, 100]: 2 (the book's value) lets the downstream refuse half of
// the requests before any is dropped; 1.1 drops as soon as it refuses a
// tenth. Anything else, NaN included, makes [NewRetryBudget] return a
// [*PolicyError].
func WithThrottle(k float64) RetryBudgetOption {
	return retryBudgetOption(func(b *RetryBudget) error {
		if !(k >= 1 && k <= 100) {
			return &PolicyError{"deadline.WithThrottle", k, "in [1, 100] (e.g. 2: the SRE book's K)"}
		}
		b.k = k
		return nil
	})
}

// NewRetryBudget returns a RetryBudget with the defaults
// ([DefaultRetryRatio], [DefaultRetryWindow], [DefaultMinRetryRate]) changed
// by opts, whose window starts now. An invalid option returns a
// [*PolicyError] naming it; nil options are ignored.
func NewRetryBudget(opts ...RetryBudgetOption) (*RetryBudget, error) {
	b := &RetryBudget{ratio: DefaultRetryRatio, window: DefaultRetryWindow, reserve: DefaultMinRetryRate}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(b); err != nil {
			return nil, err
		}
	}
	b.reserve *= b.window.Seconds()
	b.bucket = max(b.window/retryBuckets, 1)
	b.origin = time.Now()
	return b, nil
}

// Ratio returns the share of first attempts that may be retried.
func (b *RetryBudget) Ratio() float64 { return b.ratio }

// Window returns the window over which attempts are counted.
func (b *RetryBudget) Window() time.Duration { return b.window }

// Balance returns the retries the budget would allow now: ratio × the first
// attempts of the window + minRate × window − the retries taken and the
// charges made in it, rounded down. It is negative when charges
// ([RetryBudget.Charge]) overdrew the budget, and saturates at math.MaxInt
// (a minimum rate so large that the allowance does not fit an int).
func (b *RetryBudget) Balance() int {
	return b.balance(b.epoch())
}

// Charge draws n tokens from the budget without asking, as if n retries had
// been taken: an overload signal from the downstream (a 503 or 429 with no
// Retry-After, say) makes the fleet's retries rarer at once. The balance
// may go negative; the charge expires with the window like a retry. n <= 0
// does nothing.
func (b *RetryBudget) Charge(n int) {
	if n > 0 {
		e := b.epoch()
		add(&b.withdrawals, e, n)
		if b.k > 0 {
			add(&b.requests, e, n)
		}
	}
}

// Throttle returns the throttling K ([WithThrottle]), 0 when off.
func (b *RetryBudget) Throttle() float64 { return b.k }

// DropProbability returns the probability that client-side throttling
// drops an attempt now ([WithThrottle]): max(0, (requests − K × accepts) /
// (requests + 1)) over the window; 0 when throttling is off.
func (b *RetryBudget) DropProbability() float64 {
	if b.k == 0 {
		return 0
	}
	return b.dropP(b.epoch())
}

func (b *RetryBudget) dropP(e uint32) float64 {
	var req, acc uint64
	for i := range retryBuckets {
		req += count(b.requests[i].Load(), e)
		acc += count(b.accepts[i].Load(), e)
	}
	return max(0, (float64(req)-b.k*float64(acc))/float64(req+1))
}

// throttled reports whether throttling drops an attempt, draw being
// uniform in [0, 1), and counts a dropped one as a request. An attempt that
// goes out is counted when it ends ([RetryBudget.ended]): counted as it
// started, every attempt in flight would weigh as a refusal until it
// returns, and a cold budget would drop nearly everything while its first
// attempts are out.
func (b *RetryBudget) throttled(draw float64) bool {
	e := b.epoch()
	if draw < b.dropP(e) {
		add(&b.requests, e, 1)
		return true
	}
	return false
}

// ended counts an attempt that went out and ended, accepted by the
// downstream or not.
func (b *RetryBudget) ended(accepted bool) {
	e := b.epoch()
	add(&b.requests, e, 1)
	if accepted {
		add(&b.accepts, e, 1)
	}
}

// deposit counts a first attempt.
func (b *RetryBudget) deposit() {
	add(&b.deposits, b.epoch(), 1)
}

// withdraw asks for one retry. It reports whether the retry is allowed and
// the balance after the decision.
func (b *RetryBudget) withdraw() (bool, int) {
	e := b.epoch()
	add(&b.withdrawals, e, 1)
	bal := b.balance(e)
	if bal >= 0 {
		return true, bal
	}
	// Overdrawn: give the token back (if its bucket has not moved on).
	add(&b.withdrawals, e, -1)
	return false, bal + 1
}

// epoch is the number of the current bucket since the budget's origin,
// truncated to 32 bits: after 2³² buckets (136 years of the default 1s
// buckets, 50 days of 1ms ones) a bucket idle for exactly that long would
// be counted again, for at most a window. A clock behind the origin (a budget built outside a
// testing/synctest bubble and used inside it) counts as the origin.
func (b *RetryBudget) epoch() uint32 {
	return uint32(max(time.Since(b.origin), 0) / b.bucket)
}

// balance is the allowance of the window ending in bucket e less its
// withdrawals.
func (b *RetryBudget) balance(e uint32) int {
	var dep, wd uint64
	for i := range retryBuckets {
		dep += count(b.deposits[i].Load(), e)
		wd += count(b.withdrawals[i].Load(), e)
	}
	// The small epsilon keeps a product such as 0.2 × 5 from rounding
	// down to 0.
	allow := math.Floor(b.ratio*float64(dep) + b.reserve + 1e-9)
	// Saturate at the largest int: converting an allowance of 2⁶³ or more
	// (WithMinRetryRate(1e18) over a 10s window) to int64 would overflow
	// to a hugely negative balance.
	if !(allow < 1<<63) {
		return math.MaxInt
	}
	return int(min(int64(allow)-int64(wd), math.MaxInt))
}

// count is the count a bucket word holds if its epoch is within the window
// ending at epoch e, else 0.
func count(w uint64, e uint32) uint64 {
	if e-uint32(w>>32) < retryBuckets {
		return w & math.MaxUint32
	}
	return 0
}

// staleWriter bounds how far behind the bucket's epoch a writer may be for
// add to drop its count rather than reset the bucket: far enough for a
// goroutine descheduled across a window, far below 2³¹ so that a bucket
// idle for that many epochs (25 days of 1ms buckets) is reset, not frozen.
const staleWriter = 1 << 16

// add adds delta to the count of bucket e in ring, the bucket being reset
// first if it still holds an older epoch. A negative delta (an undo) does
// nothing once the bucket has moved on, and never takes the count below 0;
// the count saturates at 2³²−1.
func add(ring *[retryBuckets]atomic.Uint64, e uint32, delta int) {
	slot := &ring[e%retryBuckets]
	for {
		w := slot.Load()
		var c uint64
		switch we := uint32(w >> 32); {
		case we == e:
			c = w & math.MaxUint32
		case delta < 0 || we-e < staleWriter:
			// An undo after the bucket moved on, or a writer that read the
			// clock a whole window ago and finds its bucket already reused
			// for a later epoch: the count it meant has expired.
			return
		}
		switch {
		case delta < 0:
			c -= min(c, uint64(-delta))
		default:
			c = min(c+uint64(delta), math.MaxUint32)
		}
		if slot.CompareAndSwap(w, uint64(e)<<32|c) {
			return
		}
	}
}
