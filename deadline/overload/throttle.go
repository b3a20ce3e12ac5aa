package overload

import (
	"time"

	"github.com/deadlinebudget/budget/deadline/internal/ring"
)

// The throttle's defaults ([NewThrottle]).
const (
	// DefaultThrottleK is the SRE book's K: the downstream may refuse
	// half of the requests before any is dropped.
	DefaultThrottleK = 2.0
	// DefaultThrottleWindow is the sliding window requests and accepts
	// are counted over.
	DefaultThrottleWindow = 10 * time.Second
)

// Throttle is client-side throttling, the form of Google's SRE book
// ("Handling Overload", 2016): it counts, over a sliding window, the
// requests sent to one downstream and those the downstream accepted, and
// drops a new request on the client with probability
//
//	max(0, (requests − K × accepts) / (requests + 1))
//
// so that a downstream refusing most of its calls is not sent the calls
// it would refuse. A dropped request counts as a request too, so the drop
// rate follows the downstream's own refusal rate, and once it accepts
// again the probability falls back to 0 within the window.
//
// Set one on a deadline.Policy (Policy.Throttle), shared by every policy
// that calls the downstream: before an attempt goes out, first, retry or
// hedge, [Throttle.Allow] decides, and when it ends [Throttle.Record]
// counts its [Outcome]. A caller without package deadline does the same.
// An overload answer the caller sees elsewhere can be counted with
// [Throttle.Charge].
//
// A Throttle is safe for concurrent use and takes no lock: its counts are
// the retry budget's lock-free ring of buckets. The zero Throttle is not
// usable: build it with [NewThrottle], inside a testing/synctest bubble to
// run it on the bubble's clock.
type Throttle struct {
	k        float64
	window   time.Duration
	clock    ring.Clock
	requests ring.Counts
	accepts  ring.Counts
}

// ThrottleOption configures a [Throttle] built by [NewThrottle].
type ThrottleOption interface{ apply(*throttleConfig) error }

type throttleConfig struct {
	k      float64
	window time.Duration
}

type throttleOption func(*throttleConfig) error

func (f throttleOption) apply(c *throttleConfig) error { return f(c) }

// WithThrottleK sets K, in [1, 100] (default [DefaultThrottleK]): 2 lets
// the downstream refuse half of the requests before any is dropped; 1.1
// drops as soon as it refuses a tenth. Anything else, NaN included, makes
// [NewThrottle] return an [*OptionError].
func WithThrottleK(k float64) ThrottleOption {
	return throttleOption(func(c *throttleConfig) error {
		if !(k >= 1 && k <= 100) {
			return &OptionError{"overload.WithThrottleK", k, "in [1, 100] (e.g. 2: the SRE book's K)"}
		}
		c.k = k
		return nil
	})
}

// WithThrottleWindow sets the sliding window requests and accepts are
// counted over (> 0, default [DefaultThrottleWindow]); counts leave it a
// tenth of the window at a time. Anything else makes [NewThrottle] return
// an [*OptionError].
func WithThrottleWindow(d time.Duration) ThrottleOption {
	return throttleOption(func(c *throttleConfig) error {
		if d <= 0 {
			return &OptionError{"overload.WithThrottleWindow", d, "> 0"}
		}
		c.window = d
		return nil
	})
}

// NewThrottle returns a Throttle with the defaults changed by opts, whose
// window starts now. An invalid option returns an [*OptionError] naming
// it; nil options are ignored.
func NewThrottle(opts ...ThrottleOption) (*Throttle, error) {
	c := throttleConfig{k: DefaultThrottleK, window: DefaultThrottleWindow}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&c); err != nil {
			return nil, err
		}
	}
	return &Throttle{k: c.k, window: c.window, clock: ring.NewClock(c.window)}, nil
}

// K returns the throttle's K; 0 for a Throttle not built by
// [NewThrottle].
func (t *Throttle) K() float64 { return t.k }

// Window returns the window requests are counted over.
func (t *Throttle) Window() time.Duration { return t.window }

// DropProbability returns the probability that the throttle drops a
// request now: max(0, (requests − K × accepts) / (requests + 1)) over the
// window. Read without a lock, for a gauge.
func (t *Throttle) DropProbability() float64 {
	if !t.clock.Valid() {
		return 0
	}
	return t.dropP(t.clock.Epoch())
}

func (t *Throttle) dropP(e uint32) float64 {
	req, acc := t.requests.Sum(e), t.accepts.Sum(e)
	return max(0, (float64(req)-t.k*float64(acc))/float64(req+1))
}

// Allow reports whether a request may go out, draw being uniform in
// [0, 1) (e.g. rand.Float64()); a dropped one (false) is counted as a
// request. A request that goes out is counted when it ends
// ([Throttle.Record]): counted as it started, every request in flight
// would weigh as a refusal until it returns, and a cold throttle would
// drop nearly everything while its first requests are out. It allocates
// nothing and takes no lock.
func (t *Throttle) Allow(draw float64) bool {
	e := t.clock.Epoch()
	if draw < t.dropP(e) {
		t.requests.Add(e, 1)
		return false
	}
	return true
}

// Record counts a request that went out and ended as o: accepted by the
// downstream ([OutcomeSuccess], [OutcomeAnswered], [OutcomeFailure],
// [OutcomeError]: it answered) or refused ([OutcomeOverload],
// [OutcomeTimeout], [OutcomeCut]: no answer in time). [OutcomeIgnore] (the
// caller gave up, or a hedge lost) is not counted.
func (t *Throttle) Record(o Outcome) {
	if o == OutcomeIgnore {
		return
	}
	e := t.clock.Epoch()
	t.requests.Add(e, 1)
	if o.accepted() {
		t.accepts.Add(e, 1)
	}
}

// Charge counts n refused requests (n <= 0 does nothing): an overload
// signal seen elsewhere (a 503 or 429 with no Retry-After, say, that the
// caller also charges to its retry budget) draws the accepted share down
// at once.
func (t *Throttle) Charge(n int) {
	if n > 0 && t.clock.Valid() {
		t.requests.Add(t.clock.Epoch(), n)
	}
}
