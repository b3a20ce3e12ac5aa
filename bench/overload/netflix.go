package overload

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// The Netflix rows re-implement, in Go, the algorithms of
// github.com/Netflix/concurrency-limits (Java, no Go release), read at these
// commits:
//
//   - concurrency-limits-core/src/main/java/com/netflix/concurrency/limits/limit/Gradient2Limit.java
//     at f2528defbbf080dcaf5567861faec1506bac0aa2,
//   - .../limit/WindowedLimit.java at b108aa802a98086117a95afb52e43c865a8c4160
//     (and ImmutableSampleWindow.java at 134ade9bb36500f8acd9e8c24a7d2661d230d4ce),
//   - .../limit/VegasLimit.java at 7989055a5dfd1f2bb654ca8a200db8ac8d629eda
//     (and functions/Log10RootFunction.java at 37ee6dea54f2e061bab85b65d6816f0255b85edc),
//   - .../limit/measurement/ExpAvgMeasurement.java at 11c70606499f8123ba45d8355543dfec67c50162,
//
// behind the semantics of its SimpleLimiter (AbstractLimiter): a call is
// refused at once when the calls in flight reach the limit; a call that
// got its answer is a sample (its start, round-trip time and the calls in
// flight when it started), and one that timed out or was refused by the
// downstream is a dropped sample (onDropped). Each is configured with its
// builder's defaults, as the project's README shows
// (SimpleLimiter.newBuilder().limit(WindowedLimit.newBuilder().build(
// Gradient2Limit.newBuilder().build()))).

// limitAlgorithm is a Netflix Limit: it learns from samples and gives the
// limit.
type limitAlgorithm interface {
	onSample(start time.Time, rtt time.Duration, inflight int, didDrop bool)
	limit() int
}

// simpleLimiter is Netflix's SimpleLimiter over a limitAlgorithm.
type simpleLimiter struct {
	mu       sync.Mutex
	alg      limitAlgorithm
	inflight int
}

func newSimpleLimiter(alg limitAlgorithm) *simpleLimiter { return &simpleLimiter{alg: alg} }

// Call acquires a slot or refuses, sends, and reports the sample.
func (l *simpleLimiter) Call(ctx context.Context, _ Call, send Send) error {
	l.mu.Lock()
	if l.inflight >= l.alg.limit() {
		l.mu.Unlock()
		return errLimited
	}
	l.inflight++
	inflight := l.inflight
	l.mu.Unlock()
	start := time.Now()
	err := send(ctx)
	rtt := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	switch {
	case err == nil:
		l.alg.onSample(start, rtt, inflight, false)
	case errors.Is(err, ErrOverloaded), errors.Is(err, context.DeadlineExceeded):
		l.alg.onSample(start, rtt, inflight, true)
	default: // ignored (onIgnore)
	}
	return err
}

// gradient2Config describes the Gradient2 row.
const gradient2Config = "Netflix concurrency-limits' Gradient2Limit in a WindowedLimit, builders' defaults, behind SimpleLimiter, " +
	"re-implemented in Go from Gradient2Limit.java (f2528de), WindowedLimit.java (b108aa8): initial limit 20, min 20, max 200, " +
	"smoothing 0.2, queue size 4, long window 600 (exponential average), RTT tolerance 1.5; windows of 1s and > 10 samples, " +
	"each window's average RTT and max in flight feeding the limit; over the limit, refused at once"

// gradient2 is Gradient2Limit with its builder's defaults.
type gradient2 struct {
	estimated float64
	longRtt   expAvg
	minLimit  float64
	maxLimit  float64
	queueSize float64
	smoothing float64
	tolerance float64
}

func newGradient2() *gradient2 {
	return &gradient2{estimated: 20, longRtt: expAvg{window: 600, warmup: 10},
		minLimit: 20, maxLimit: 200, queueSize: 4, smoothing: 0.2, tolerance: 1.5}
}

func (g *gradient2) limit() int { return int(g.estimated) }

func (g *gradient2) onSample(_ time.Time, rtt time.Duration, inflight int, _ bool) {
	short := float64(rtt)
	long := g.longRtt.add(short)
	// A long RTT far above the short one (after a long overload) decays
	// faster than its average would.
	if long/short > 2 {
		g.longRtt.value *= 0.95
	}
	if float64(inflight) < g.estimated/2 { // application-limited: do not grow
		return
	}
	gradient := math.Max(0.5, math.Min(1, g.tolerance*long/short))
	next := g.estimated*gradient + g.queueSize
	next = g.estimated*(1-g.smoothing) + next*g.smoothing
	g.estimated = math.Max(g.minLimit, math.Min(g.maxLimit, next))
}

// expAvg is ExpAvgMeasurement: the plain mean of the first warmup
// samples, then an exponential average of factor 2/(window+1).
type expAvg struct {
	window, warmup, count int
	sum, value            float64
}

func (e *expAvg) add(x float64) float64 {
	if e.count < e.warmup {
		e.count++
		e.sum += x
		e.value = e.sum / float64(e.count)
	} else {
		f := 2 / float64(e.window+1)
		e.value = e.value*(1-f) + x*f
	}
	return e.value
}

// windowed is WindowedLimit with its builder's defaults: it gathers
// samples for a window (between 1s and 1s, twice the window's minimum RTT
// clamped to that range) of more than 10 samples, then gives the delegate
// the window's average RTT, its maximum in flight and whether any sample
// dropped. Samples under 100µs are ignored.
type windowed struct {
	delegate limitAlgorithm
	next     time.Time
	minRtt   time.Duration
	sum      time.Duration
	count    int
	maxIn    int
	dropped  bool
}

func newWindowed(d limitAlgorithm) *windowed { return &windowed{delegate: d, minRtt: math.MaxInt64} }

func (w *windowed) limit() int { return w.delegate.limit() }

func (w *windowed) onSample(start time.Time, rtt time.Duration, inflight int, didDrop bool) {
	if rtt < 100*time.Microsecond {
		return
	}
	w.maxIn = max(w.maxIn, inflight)
	if didDrop {
		w.dropped = true
	} else {
		w.minRtt = min(w.minRtt, rtt)
		w.sum += rtt
		w.count++
	}
	end := start.Add(rtt)
	if !end.After(w.next) || w.minRtt == math.MaxInt64 || w.count <= 10 {
		return
	}
	w.next = end.Add(min(max(2*w.minRtt, time.Second), time.Second))
	avg, maxIn, dropped := w.sum/time.Duration(w.count), w.maxIn, w.dropped
	*w = windowed{delegate: w.delegate, next: w.next, minRtt: math.MaxInt64}
	w.delegate.onSample(start, avg, maxIn, dropped)
}

// vegasConfig describes the Vegas row.
const vegasConfig = "Netflix concurrency-limits' VegasLimit, builder's defaults, behind SimpleLimiter, re-implemented in Go from VegasLimit.java (7989055): " +
	"initial limit 20, max 1000, smoothing 1, alpha 3·log10(limit), beta 6·log10(limit), threshold log10(limit), increase/decrease by log10(limit), " +
	"a new no-load RTT probed every 30 × limit × U[0.5, 1) samples; every sample updates the limit; a drop decreases it; over the limit, refused at once"

// vegas is VegasLimit with its builder's defaults.
type vegas struct {
	estimated  float64
	rttNoLoad  time.Duration
	maxLimit   float64
	probeCount int
	jitter     float64
	rng        *rand.Rand
}

func newVegas() *vegas {
	v := &vegas{estimated: 20, maxLimit: 1000, rng: rand.New(rand.NewPCG(7, 31))}
	v.jitter = 0.5 + 0.5*v.rng.Float64()
	return v
}

// log10root is Log10RootFunction: max(1, ⌊log10 n⌋) below 1000, ⌊√n⌋ above.
func log10root(n int) int {
	if n < 1000 {
		if n < 1 {
			return 1
		}
		return max(1, int(math.Log10(float64(n))))
	}
	return int(math.Sqrt(float64(n)))
}

func (v *vegas) limit() int { return int(v.estimated) }

func (v *vegas) onSample(_ time.Time, rtt time.Duration, inflight int, didDrop bool) {
	if rtt <= 0 {
		return
	}
	v.probeCount++
	if v.jitter*30*v.estimated <= float64(v.probeCount) { // probe a new no-load RTT
		v.jitter = 0.5 + 0.5*v.rng.Float64()
		v.probeCount = 0
		v.rttNoLoad = rtt
		return
	}
	if v.rttNoLoad == 0 || rtt < v.rttNoLoad {
		v.rttNoLoad = rtt
		return
	}
	queue := int(math.Ceil(v.estimated * (1 - float64(v.rttNoLoad)/float64(rtt))))
	l := int(v.estimated)
	var next float64
	switch {
	case didDrop:
		next = v.estimated - float64(log10root(l))
	case float64(inflight)*2 < v.estimated: // not near the limit: no upward drift
		return
	case queue <= log10root(l):
		next = v.estimated + float64(6*log10root(l))
	case queue < 3*log10root(l):
		next = v.estimated + float64(log10root(l))
	case queue > 6*log10root(l):
		next = v.estimated - float64(log10root(l))
	default:
		return
	}
	v.estimated = math.Max(1, math.Min(v.maxLimit, next)) // smoothing 1
}
