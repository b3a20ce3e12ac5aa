package otelbudget

import "github.com/deadlinebudget/budget/deadline"

// Verdict answers the incident question for one logical call: was the
// deadline too small, or was the operation too slow? It is set on the call
// span as [AttrVerdict] and on the call metrics.
type Verdict string

// The verdicts, in the order [VerdictOf] tries them.
const (
	// VerdictOK: the call returned a result.
	VerdictOK Verdict = "ok"
	// VerdictCanceled: the caller canceled the context (not the deadline).
	VerdictCanceled Verdict = "canceled"
	// VerdictThrottled: a server's Retry-After did not fit in what was left.
	VerdictThrottled Verdict = "throttled"
	// VerdictTooSlow: at least one attempt ran its whole configured ceiling
	// and the ceiling ended it.
	VerdictTooSlow Verdict = "operation_too_slow"
	// VerdictDeadlineTooSmall: the call stopped for time otherwise: an
	// attempt still inside its ceiling was cut by the shared deadline, an
	// attempt was refused below the floor, or a backoff sleep did not fit.
	VerdictDeadlineTooSmall Verdict = "deadline_too_small"
	// VerdictFailed: the call stopped on errors, not time: a non-retryable
	// error, attempts exhausted on errors, or a panic.
	VerdictFailed Verdict = "operation_failed"
)

// VerdictOf returns the verdict for a call that ended with r. The first rule
// that applies decides:
//
//  1. [VerdictOK] when r.Reason is [deadline.ReasonSuccess];
//  2. [VerdictCanceled] when r.Reason is [deadline.ReasonCanceled];
//  3. [VerdictThrottled] when r.Reason is [deadline.ReasonRetryAfterTooLong];
//  4. [VerdictTooSlow] when r.CeilingTimeouts > 0: an attempt ran its whole
//     ceiling and the ceiling ended it, whatever stopped the call afterwards
//     (attempts exhausted, a later attempt cut by the deadline, a refusal, a
//     backoff that did not fit);
//  5. [VerdictDeadlineTooSmall] when r.Reason is [deadline.ReasonDeadline],
//     [deadline.ReasonRefused] or [deadline.ReasonBackoffTooLong];
//  6. [VerdictFailed] otherwise: [deadline.ReasonNotRetryable],
//     [deadline.ReasonExhausted] (on errors), [deadline.ReasonPanic], or a
//     reason this version does not know.
//
// Rule 4 comes before rule 5 because an attempt that used its whole ceiling
// says the ceiling, not the budget, was the binding limit: a larger budget
// would not have made that attempt succeed.
func VerdictOf(r deadline.CallResult) Verdict {
	switch r.Reason {
	case deadline.ReasonSuccess:
		return VerdictOK
	case deadline.ReasonCanceled:
		return VerdictCanceled
	case deadline.ReasonRetryAfterTooLong:
		return VerdictThrottled
	}
	if r.CeilingTimeouts > 0 {
		return VerdictTooSlow
	}
	switch r.Reason {
	case deadline.ReasonDeadline, deadline.ReasonRefused, deadline.ReasonBackoffTooLong:
		return VerdictDeadlineTooSmall
	}
	return VerdictFailed
}
