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
	// VerdictTooSlow: at least one attempt was bound by its ceiling and
	// reached it ([CallResult.CeilingTimeouts] > 0): the operation, not the
	// budget, was the limit.
	VerdictTooSlow Verdict = "operation_too_slow"
	// VerdictDeadlineTooSmall: the call stopped for time otherwise: an
	// attempt whose grant the shared deadline set was ended by it, an
	// attempt was refused below the floor, or a backoff sleep did not fit.
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
//  4. [VerdictTooSlow] when r.CeilingTimeouts > 0: an attempt bound by its
//     ceiling (configured or learned, [LimitLearnedCeiling]) reached it, whatever stopped the call afterwards (attempts
//     exhausted, a later attempt cut by the deadline, a refusal, a backoff
//     that did not fit, a non-retryable error);
//  5. [VerdictDeadlineTooSmall] when r.Reason is [ReasonDeadline],
//     [ReasonRefused] or [ReasonBackoffTooLong];
//  6. [VerdictFailed] otherwise: [ReasonNotRetryable], [ReasonExhausted]
//     (on errors), [ReasonPanic], or a reason this version does not know.
//
// Rule 4 comes before rule 5 because an attempt that used its whole ceiling
// says the ceiling, not the budget, was the binding limit: a larger budget
// would not have made that attempt succeed.
func VerdictOf(r CallResult) Verdict {
	switch r.Reason {
	case ReasonSuccess:
		return VerdictOK
	case ReasonCanceled:
		return VerdictCanceled
	case ReasonRetryAfterTooLong:
		return VerdictThrottled
	}
	if r.CeilingTimeouts > 0 {
		return VerdictTooSlow
	}
	switch r.Reason {
	case ReasonDeadline, ReasonRefused, ReasonBackoffTooLong:
		return VerdictDeadlineTooSmall
	}
	return VerdictFailed
}
