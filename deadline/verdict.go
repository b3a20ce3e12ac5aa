package deadline

// Verdict answers the incident question for one call made by [Do]: was the
// deadline too small, or was the operation too slow? [VerdictOf] derives it
// from the call's [CallResult]; [LogHooks] logs it (key verdict) and the
// otelbudget package sets it on the call's span and metrics.
//
// Its value is a stable snake_case name ("ok", "deadline_too_small", …),
// safe to use as a metric or log attribute. The zero Verdict is the empty
// string and is never returned by VerdictOf.
type Verdict string

// The verdicts, in the order [VerdictOf] tries them.
const (
	// VerdictOK: the call returned a result.
	VerdictOK Verdict = "ok"
	// VerdictCanceled: the caller canceled the context (not a deadline).
	VerdictCanceled Verdict = "canceled"
	// VerdictThrottled: a server's Retry-After did not fit in what was left.
	VerdictThrottled Verdict = "throttled"
	// VerdictRetriesThrottled: the shared retry budget denied a retry
	// ([ReasonRetryBudget]): the downstream is failing for many callers at
	// once, and retries were shed to keep them from multiplying its load.
	VerdictRetriesThrottled Verdict = "retries_throttled"
	// VerdictOverloaded: the downstream was at its capacity and the call
	// was not sent ([ReasonLimited]: the [Policy.Limiter]'s queue was full, or
	// the call could not finish from its place in it; [ReasonThrottled]:
	// client-side throttling): neither the deadline nor the operation,
	// but the downstream's capacity, ended it.
	VerdictOverloaded Verdict = "downstream_overloaded"
	// VerdictOpen: the [Policy.Limiter]'s breaker was open ([ReasonOpen]): the
	// downstream has been failing, and nothing was sent.
	VerdictOpen Verdict = "downstream_open"
	// VerdictTooSlow: at least one attempt was bound by its ceiling and
	// reached it ([CallResult.CeilingTimeouts] > 0): the operation, not the
	// budget, was the limit.
	VerdictTooSlow Verdict = "operation_too_slow"
	// VerdictDeadlineTooSmall: the call stopped for time otherwise: an
	// attempt whose grant the shared deadline set was ended by it, an
	// attempt was refused below the floor (fixed, or learned: the lease left
	// would very likely not have sufficed), or a backoff sleep did not fit.
	VerdictDeadlineTooSmall Verdict = "deadline_too_small"
	// VerdictFailed: the call stopped on errors, not time: a non-retryable
	// error, attempts exhausted on errors, or a panic.
	VerdictFailed Verdict = "operation_failed"
)

// String returns the verdict's stable name, e.g. "operation_too_slow".
func (v Verdict) String() string { return string(v) }

// VerdictOf returns the verdict for a call that ended with r. The first rule
// that applies decides:
//
//  1. [VerdictOK] when r.Reason is [ReasonSuccess];
//  2. [VerdictCanceled] when r.Reason is [ReasonCanceled];
//  3. [VerdictThrottled] when r.Reason is [ReasonRetryAfterTooLong];
//  4. [VerdictRetriesThrottled] when r.Reason is [ReasonRetryBudget];
//  5. [VerdictOverloaded] when r.Reason is [ReasonLimited] or
//     [ReasonThrottled], [VerdictOpen] when it is [ReasonOpen];
//  6. [VerdictTooSlow] when r.CeilingTimeouts > 0: an attempt bound by its
//     ceiling (configured or learned, [LimitLearnedCeiling]) reached it, whatever stopped the call afterwards (attempts
//     exhausted, a later attempt cut by the deadline, a refusal, a backoff
//     that did not fit, a non-retryable error);
//  7. [VerdictDeadlineTooSmall] when r.Reason is [ReasonDeadline],
//     [ReasonRefused], [ReasonRefusedLearned] (the lease left would very
//     likely not have sufficed, before anything was sent) or
//     [ReasonBackoffTooLong];
//  8. [VerdictFailed] otherwise: [ReasonNotRetryable], [ReasonExhausted]
//     (on errors), [ReasonPanic], or a reason this version does not know.
//
// Rules 3 to 5 come first among the failures because something outside
// the call, a server's Retry-After or the fleet's retry budget, decided
// that no retry would follow, with time left: neither the deadline nor the
// operation alone ended the call. A denied retry says the downstream fails
// for many callers at once; an earlier attempt that reached its ceiling
// (rule 6) is then a symptom of that outage, and the retry that would have
// followed was shed on purpose, so the verdict names the storm, not the
// ceiling; a limiter, a throttle or a breaker that refused an attempt
// likewise names the downstream's state. Rule 6 comes before rule 7 because an attempt that used its
// whole ceiling says the ceiling, not the budget, was the binding limit: a
// larger budget would not have made that attempt succeed.
func VerdictOf(r CallResult) Verdict {
	switch r.Reason {
	case ReasonSuccess:
		return VerdictOK
	case ReasonCanceled:
		return VerdictCanceled
	case ReasonRetryAfterTooLong:
		return VerdictThrottled
	case ReasonRetryBudget:
		return VerdictRetriesThrottled
	case ReasonLimited, ReasonThrottled:
		return VerdictOverloaded
	case ReasonOpen:
		return VerdictOpen
	}
	if r.CeilingTimeouts > 0 {
		return VerdictTooSlow
	}
	switch r.Reason {
	case ReasonDeadline, ReasonRefused, ReasonRefusedLearned, ReasonBackoffTooLong:
		return VerdictDeadlineTooSmall
	}
	return VerdictFailed
}
