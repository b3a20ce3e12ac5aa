package overload

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// envoyConfig describes the Envoy row.
const envoyConfig = "Envoy's adaptive concurrency filter, gradient controller, re-implemented in Go from " +
	"source/extensions/filters/http/adaptive_concurrency/controller/gradient_controller.cc (c35f67f) and gradient_controller.h (6e06b0d), " +
	"configured as Envoy's documentation example: sample_aggregate_percentile 90, concurrency_update_interval 100ms, " +
	"min_rtt_calc_params {interval 60s, request_count 50, jitter 10%}, and the defaults min_concurrency 3, buffer 25%, max 1000; " +
	"over the limit, refused at once (Envoy's 503)"

// envoy is Envoy's gradient controller: it measures a minRTT (the
// percentile of request_count samples taken with the limit pinned to
// min_concurrency), re-measured every interval (with jitter, or after 5
// windows pinned at the minimum); between those, every update interval,
// limit = limit × clamp((minRTT × (1+buffer)) / sampleRTT, 0.5, 2), plus √
// of that as headroom. A request answered is a latency sample (an upstream
// 503 included); one reset (its caller gone) is not (cancelLatencySample).
// Envoy's timers are evaluated lazily, on each request and each sample.
type envoy struct {
	mu sync.Mutex

	percentile   float64
	update       time.Duration
	interval     time.Duration
	requestCount int
	jitter       float64
	minConc      int
	buffer       float64
	maxConc      int

	limit       int
	outstanding int
	deferred    int // the limit before the minRTT window; > 0: in the window
	minRTT      time.Duration
	samples     []time.Duration
	epoch       time.Time // samples of requests sent before it are dropped
	nextMinRTT  time.Time // zero: not armed
	nextReset   time.Time // zero: not armed
	atMin       int       // consecutive updates that set the minimum
	rng         *rand.Rand
}

func newEnvoy() *envoy {
	e := &envoy{percentile: 0.9, update: 100 * time.Millisecond, interval: 60 * time.Second, requestCount: 50,
		jitter: 0.10, minConc: 3, buffer: 0.25, maxConc: 1000, rng: rand.New(rand.NewPCG(11, 31))}
	e.limit = e.minConc
	e.enterMinRTT(time.Now())
	e.nextReset = time.Now().Add(e.update)
	return e
}

func (e *envoy) inMinRTT() bool { return e.deferred > 0 }

func (e *envoy) enterMinRTT(now time.Time) {
	if e.inMinRTT() {
		return
	}
	e.deferred = e.limit
	e.setLimit(e.minConc)
	e.samples = e.samples[:0]
	e.epoch = now
	e.nextMinRTT = time.Time{}
}

// timers runs the timers due at now.
func (e *envoy) timers(now time.Time) {
	if !e.nextMinRTT.IsZero() && !now.Before(e.nextMinRTT) {
		e.enterMinRTT(now)
	}
	for !e.nextReset.IsZero() && !now.Before(e.nextReset) {
		if e.inMinRTT() { // given up: re-armed when the minRTT is known
			e.nextReset = time.Time{}
			break
		}
		if len(e.samples) > 0 {
			sample := e.quantile()
			gradient := math.Max(0.5, math.Min(2, float64(e.minRTT)*(1+e.buffer)/float64(sample)))
			l := float64(e.limit) * gradient
			e.setLimit(max(e.minConc, min(e.maxConc, int(l+math.Sqrt(l)))))
		}
		e.nextReset = e.nextReset.Add(e.update)
		if !e.nextMinRTT.IsZero() && !now.Before(e.nextMinRTT) {
			e.enterMinRTT(now)
		}
	}
}

func (e *envoy) quantile() time.Duration {
	slices.Sort(e.samples)
	q := e.samples[min(len(e.samples)-1, int(e.percentile*float64(len(e.samples))))]
	e.samples = e.samples[:0]
	return q
}

func (e *envoy) setLimit(n int) {
	old := e.limit
	e.limit = n
	if !e.inMinRTT() && old == e.minConc && n == e.minConc {
		e.atMin++
	} else {
		e.atMin = 0
	}
	if e.atMin >= 5 { // pinned at the minimum: the minRTT may be wrong, measure it again
		e.nextMinRTT = time.Now()
	}
}

// Call forwards the request or refuses it, then records its latency.
func (e *envoy) Call(ctx context.Context, _ Call, send Send) error {
	now := time.Now()
	e.mu.Lock()
	e.timers(now)
	if e.outstanding >= e.limit {
		e.mu.Unlock()
		return errLimited
	}
	e.outstanding++
	e.mu.Unlock()
	err := send(ctx)
	end := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.outstanding--
	e.timers(end)
	if err != nil && !errors.Is(err, ErrOverloaded) { // reset: no answer, no sample
		return err
	}
	if now.Before(e.epoch) {
		return err
	}
	e.samples = append(e.samples, end.Sub(now))
	if e.inMinRTT() && len(e.samples) >= e.requestCount {
		e.minRTT = e.quantile()
		e.setLimit(e.deferred)
		e.deferred = 0
		j := time.Duration(0)
		if r := int64(math.Ceil(float64(e.interval/time.Millisecond) * e.jitter)); r > 0 {
			j = time.Duration(e.rng.Int64N(r)) * time.Millisecond
		}
		e.nextMinRTT = end.Add(e.interval + j)
		e.nextReset = end.Add(e.update)
	}
	return err
}
