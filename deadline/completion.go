package deadline

import "time"

// CompletionEstimator estimates, from a step's recorded attempts, how likely
// an attempt is to complete within a lease (package deadline/learn provides
// one, [Policy.LearnedFloor] and server admission use it). Completion is
// called on the calling goroutine before an attempt, so it must be safe for
// concurrent use and cheap: a few atomic loads, no lock, no allocation. It
// reports ok=false when it has no estimate for step (too few samples, an
// unknown step, or a lease longer than anything it has seen, when attempts
// were cut before they completed): the caller then behaves as without it.
type CompletionEstimator interface {
	Completion(step string, lease time.Duration) (Estimate, bool)
}

// Estimate is a [CompletionEstimator]'s answer for one step and lease.
type Estimate struct {
	// P is the estimated probability, in [0, 1], that an attempt of the
	// step completes (returns, with or without an error) within the lease.
	P float64
	// Samples is the weight of the recorded attempts the estimate rests
	// on (with decay, the recent samples; older ones weigh less).
	Samples uint64
}
