package otelbudget

import "github.com/deadlinebudget/budget/deadline"

// Verdict is [deadline.Verdict], forwarded here for compatibility: was the
// deadline too small, or was the operation too slow? It is set on the call
// span as [AttrVerdict] and on the call metrics. New code can use
// deadline.Verdict directly.
type Verdict = deadline.Verdict

// The verdicts, forwarded from package deadline for compatibility; new code
// can use the deadline constants directly.
const (
	// VerdictOK is [deadline.VerdictOK]: the call returned a result.
	VerdictOK = deadline.VerdictOK
	// VerdictCanceled is [deadline.VerdictCanceled]: the caller canceled.
	VerdictCanceled = deadline.VerdictCanceled
	// VerdictThrottled is [deadline.VerdictThrottled]: a server's
	// Retry-After did not fit in what was left.
	VerdictThrottled = deadline.VerdictThrottled
	// VerdictRetriesThrottled is [deadline.VerdictRetriesThrottled]: the
	// shared retry budget denied a retry.
	VerdictRetriesThrottled = deadline.VerdictRetriesThrottled
	// VerdictTooSlow is [deadline.VerdictTooSlow]: an attempt bound by its
	// ceiling reached it.
	VerdictTooSlow = deadline.VerdictTooSlow
	// VerdictDeadlineTooSmall is [deadline.VerdictDeadlineTooSmall]: the
	// budget, not the ceilings, ended the call.
	VerdictDeadlineTooSmall = deadline.VerdictDeadlineTooSmall
	// VerdictFailed is [deadline.VerdictFailed]: errors, not time.
	VerdictFailed = deadline.VerdictFailed
)

// VerdictOf returns [deadline.VerdictOf](r), forwarded for compatibility;
// the rules, in precedence order, are documented there.
func VerdictOf(r deadline.CallResult) Verdict { return deadline.VerdictOf(r) }
