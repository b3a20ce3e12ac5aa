package overload

// Outcome is how a call ended, for what the [Limiter]'s limit, the
// [Breaker] and the [Throttle] learn from it ([Permit.Done],
// [Throttle.Record]): one vocabulary for the three.
type Outcome uint8

const (
	// OutcomeSuccess: the downstream answered, doing the work: its latency
	// is service time.
	OutcomeSuccess Outcome = iota
	// OutcomeFailure: the downstream failed after doing the work (a
	// retryable error whose latency is service time).
	OutcomeFailure
	// OutcomeOverload: the downstream said it was overloaded (an HTTP 429
	// or 503, deadline.ErrOverloaded). The breaker does not count it, and
	// its latency is not learned: the answer comes before the work it
	// refuses.
	OutcomeOverload
	// OutcomeIgnore: the caller gave up (canceled, or a hedge lost): says
	// nothing of the downstream; the slot is freed, nothing is learned.
	OutcomeIgnore
	// OutcomeCut: the caller's deadline cut the call: its latency is
	// censored (the service time exceeds it: learned only as queueing
	// when it already exceeds the tolerance), and it is no failure of the
	// downstream: the budget was too small, and the breaker does not count
	// it.
	OutcomeCut
	// OutcomeAnswered: the downstream answered, but without doing the
	// work, so its latency is not service time: an authentication failure,
	// a route not found, a request rejected by validation (HTTP's 4xx but
	// 408 and 429), an error the caller does not retry. The breaker counts
	// it as a success (the downstream is up) and throttling as accepted;
	// the limit learns nothing from it: learned, a burst of 401s answered
	// in 200 µs made every real call look queued and cut the limit from 32
	// to 4 for 98 s.
	OutcomeAnswered
	// OutcomeError: the downstream answered with an error that counts as
	// its failure (a retryable error answer): a failure for the breaker,
	// accepted by throttling, and no latency for the limit: how fast a
	// downstream fails says nothing of how long its work takes (a refusal
	// answered at once, learned, drove a route's baseline to nothing).
	OutcomeError
	// OutcomeTimeout: the call reached its own ceiling (the operation was
	// too slow): a failure for the breaker, refused for throttling, and
	// its latency censored, as OutcomeCut's.
	OutcomeTimeout
)

// What each outcome teaches:
//
//	outcome           latency (the limit)      breaker   throttling
//	OutcomeSuccess    service time             success   accepted
//	OutcomeFailure    service time             failure   accepted
//	OutcomeError      nothing                  failure   accepted
//	OutcomeTimeout    censored: queueing only  failure   refused
//	OutcomeCut        censored: queueing only  —         refused
//	OutcomeOverload   nothing                  —         refused
//	OutcomeAnswered   nothing                  success   accepted
//	OutcomeIgnore     nothing                  —         —

var outcomeNames = [...]string{
	OutcomeSuccess: "success", OutcomeFailure: "failure", OutcomeOverload: "overload", OutcomeIgnore: "ignore",
	OutcomeCut: "cut", OutcomeAnswered: "answered", OutcomeError: "error", OutcomeTimeout: "timeout",
}

// String returns the outcome's name: "success", "failure", "overload",
// "ignore", "cut", "answered", "error" or "timeout" ("unknown" for any
// other value).
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// failed reports whether the breaker counts o as a failure.
func (o Outcome) failed() bool {
	return o == OutcomeFailure || o == OutcomeError || o == OutcomeTimeout
}

// accepted reports whether throttling counts o as accepted.
func (o Outcome) accepted() bool {
	switch o {
	case OutcomeSuccess, OutcomeAnswered, OutcomeFailure, OutcomeError:
		return true
	}
	return false
}

// sampleKind is what a call that held a permit says of its route's service
// time.
type sampleKind uint8

const (
	sampleNone     sampleKind = iota // nothing: it got no service time
	sampleService                    // its latency is the service time
	sampleCensored                   // cut: the service time exceeds its latency
)

// sample is what o says of the route's service time.
func (o Outcome) sample() sampleKind {
	switch o {
	case OutcomeSuccess, OutcomeFailure:
		return sampleService
	case OutcomeCut, OutcomeTimeout:
		return sampleCensored
	}
	return sampleNone
}
