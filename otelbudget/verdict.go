package otelbudget

import "github.com/deadlinebudget/budget/deadline"

// Verdict is [deadline.Verdict]: was the deadline too small, or was the
// operation too slow? It is set on the call span as [AttrVerdict] and on the
// call metrics.
//
// Deprecated: use deadline.Verdict; this alias is kept for compatibility.
type Verdict = deadline.Verdict

// The verdicts, forwarded from package deadline.
const (
	// VerdictOK is [deadline.VerdictOK].
	//
	// Deprecated: use deadline.VerdictOK.
	VerdictOK = deadline.VerdictOK
	// VerdictCanceled is [deadline.VerdictCanceled].
	//
	// Deprecated: use deadline.VerdictCanceled.
	VerdictCanceled = deadline.VerdictCanceled
	// VerdictThrottled is [deadline.VerdictThrottled].
	//
	// Deprecated: use deadline.VerdictThrottled.
	VerdictThrottled = deadline.VerdictThrottled
	// VerdictTooSlow is [deadline.VerdictTooSlow].
	//
	// Deprecated: use deadline.VerdictTooSlow.
	VerdictTooSlow = deadline.VerdictTooSlow
	// VerdictDeadlineTooSmall is [deadline.VerdictDeadlineTooSmall].
	//
	// Deprecated: use deadline.VerdictDeadlineTooSmall.
	VerdictDeadlineTooSmall = deadline.VerdictDeadlineTooSmall
	// VerdictFailed is [deadline.VerdictFailed].
	//
	// Deprecated: use deadline.VerdictFailed.
	VerdictFailed = deadline.VerdictFailed
)

// VerdictOf returns [deadline.VerdictOf](r); the rules are documented there.
//
// Deprecated: use deadline.VerdictOf.
func VerdictOf(r deadline.CallResult) Verdict { return deadline.VerdictOf(r) }
