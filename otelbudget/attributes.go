package otelbudget

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// The attribute keys the observer sets. Every key of the project's own lives
// under the one namespace "deadline."; durations are integers in
// milliseconds, rounded to the nearest millisecond, with "_ms" in the name.
// The semantic-conventions keys http.request.resend_count and error.type are
// set as well (see docs/attributes.md for when each one is set).
//
// On the call span (one per logical call, kind INTERNAL, named by the step):
const (
	// AttrStep is the call's step name ([deadline.Policy.Name]), also on
	// attempt spans and on every metric. "" when the policy has no name.
	AttrStep = attribute.Key("deadline.step")
	// AttrBudgetMs is the run's whole budget ([deadline.Deadline.Budget]).
	AttrBudgetMs = attribute.Key("deadline.budget_ms")
	// AttrRemainingAtStartMs is the budget left when the call started.
	AttrRemainingAtStartMs = attribute.Key("deadline.remaining_at_start_ms")
	// AttrCeilingMs is the policy's per-attempt ceiling; absent when the
	// policy has none.
	AttrCeilingMs = attribute.Key("deadline.ceiling_ms")
	// AttrFloorMs is the policy's floor.
	AttrFloorMs = attribute.Key("deadline.floor_ms")
	// AttrMaxAttempts is the number of attempts the policy allows.
	AttrMaxAttempts = attribute.Key("deadline.max_attempts")
	// AttrRemainingMs is the budget left when the call ended; negative when
	// it ended after the deadline.
	AttrRemainingMs = attribute.Key("deadline.remaining_ms")
	// AttrAttempts is the number of attempts started.
	AttrAttempts = attribute.Key("deadline.attempts")
	// AttrStopReason is why the call stopped ([deadline.Reason.String]).
	AttrStopReason = attribute.Key("deadline.stop_reason")
	// AttrVerdict is the call's [Verdict].
	AttrVerdict = attribute.Key("deadline.verdict")
	// AttrCeilingTimeouts counts attempts that ran their whole ceiling and
	// were ended by it ([deadline.CallResult.CeilingTimeouts]).
	AttrCeilingTimeouts = attribute.Key("deadline.ceiling_timeouts")
	// AttrDeadlineCuts counts attempts ended by the shared deadline
	// ([deadline.CallResult.DeadlineCuts]).
	AttrDeadlineCuts = attribute.Key("deadline.deadline_cuts")
	// AttrHedges counts the attempts started as hedges
	// ([deadline.CallResult.Hedges]); set only when at least one started.
	AttrHedges = attribute.Key("deadline.hedges")
)

// On each attempt span (the observer's own INTERNAL span, or with
// [Observer.ClientHooks] the client instrumentation's span):
const (
	// AttrAttemptNumber is the attempt's number, 1 for the first.
	AttrAttemptNumber = attribute.Key("deadline.attempt.number")
	// AttrAttemptCeilingMs is the attempt's ceiling, configured or learned;
	// absent when none.
	AttrAttemptCeilingMs = attribute.Key("deadline.attempt.ceiling_ms")
	// AttrAttemptGrantedMs is the lease: min(ceiling, remaining - floor).
	AttrAttemptGrantedMs = attribute.Key("deadline.attempt.granted_ms")
	// AttrAttemptRemainingMs is the budget left when the attempt started.
	AttrAttemptRemainingMs = attribute.Key("deadline.attempt.remaining_ms")
	// AttrAttemptLimitedBy says which limit set the grant: "ceiling",
	// "deadline" or "learned_ceiling" (a ceiling from the policy's
	// [deadline.CeilingSource]).
	AttrAttemptLimitedBy = attribute.Key("deadline.attempt.limited_by")
	// AttrAttemptCeilingQuantile is the quantile of recorded durations the
	// attempt's learned ceiling came from (e.g. 0.99); set only when the
	// ceiling was learned ([deadline.AttemptInfo.CeilingQuantile]).
	AttrAttemptCeilingQuantile = attribute.Key("deadline.attempt.ceiling_quantile")
	// AttrAttemptCompletionProbability is the policy's learned floor's
	// estimate that the attempt completes within its lease
	// ([deadline.AttemptInfo.Estimate]); set only when it answered.
	AttrAttemptCompletionProbability = attribute.Key("deadline.attempt.completion_probability")
	// AttrAttemptCompletionSamples is the weight of the recent samples
	// that estimate rests on; set with the probability.
	AttrAttemptCompletionSamples = attribute.Key("deadline.attempt.completion_samples")
	// AttrAttemptProbe is true on an attempt the learned floor would have
	// refused that went out as a probe ([deadline.AttemptInfo.Probe]);
	// absent otherwise.
	AttrAttemptProbe = attribute.Key("deadline.attempt.probe")
	// AttrAttemptEndedBy says what ended the attempt: "completed", "error",
	// "attempt_timeout", "deadline", "canceled", "panic" or "hedge_lost".
	AttrAttemptEndedBy = attribute.Key("deadline.attempt.ended_by")
	// AttrAttemptRetryable is the classifier's answer for the attempt's
	// error; set only when the attempt failed.
	AttrAttemptRetryable = attribute.Key("deadline.attempt.retryable")
	// AttrRetryAfterMs is the delay a server asked for (over HTTP
	// Retry-After, or the providers' retry-after-ms and
	// x-ms-retry-after-ms), carried by the attempt's error; absent when
	// none was asked.
	AttrRetryAfterMs = attribute.Key("deadline.retry_after_ms")
	// AttrBackoffDelayMs is the wait chosen after this failed attempt;
	// set only when a retry was considered (the error was retryable and
	// attempts remained).
	AttrBackoffDelayMs = attribute.Key("deadline.backoff.delay_ms")
	// AttrBackoffSource is where that wait came from: "policy" or
	// "retry_after".
	AttrBackoffSource = attribute.Key("deadline.backoff.source")
	// AttrBackoffFits says whether the wait fitted in the budget; false means
	// the call stopped instead of sleeping.
	AttrBackoffFits = attribute.Key("deadline.backoff.fits")
)

// On the attempt span after which a retry asked the policy's retry budget
// ([deadline.Policy.RetryBudget]), on the call span when the budget denied
// the retry, and on the backoff event:
const (
	// AttrRetryBudgetDenied says whether the retry budget denied the retry
	// after this attempt (true: the call stopped without sleeping, stop
	// reason "retry_budget_exhausted"). Set only when the budget was asked:
	// the error was retryable, attempts remained and the wait fitted; on
	// the call span, only when it was true.
	AttrRetryBudgetDenied = attribute.Key("deadline.retry_budget.denied")
	// AttrRetryBudgetBalance is the retries the budget still allowed after
	// its decision ([deadline.BackoffInfo.RetryBalance]): 0 or less when it
	// denied the retry, negative when overload charges overdrew it.
	AttrRetryBudgetBalance = attribute.Key("deadline.retry_budget.balance")
)

// On the call span of a call a [overload.Limiter] or client-side throttling
// refused before an attempt went out (stop reasons "limited",
// "downstream_open" and "throttled", [deadline.StopError.Refusal]): why, the
// limit when it decided and the call's place in the queue.
const (
	// AttrLimitCause is the refusal's cause ([overload.Cause]):
	// "queue_full", "queue_timeout", "standing_queue", "open" or "throttled".
	AttrLimitCause = attribute.Key("deadline.limit.cause")
	// AttrLimitLimit is the limiter's limit when it refused (not set for
	// throttling).
	AttrLimitLimit = attribute.Key("deadline.limit.limit")
	// AttrLimitQueuePosition is the call's place in the limiter's queue
	// when it arrived, 1 the next served (queue causes only).
	AttrLimitQueuePosition = attribute.Key("deadline.limit.queue_position")
	// AttrLimitWaitedMs is how long the call waited in the queue before it
	// was refused (queue causes only; 0 when refused on arrival).
	AttrLimitWaitedMs = attribute.Key("deadline.limit.waited_ms")
)

// On the call span of a call the learned floor refused (stop reason
// "refused_learned", [deadline.LearnedFloor]), and on the backoff event of a
// retry it refused: the lease the refused attempt would have been granted,
// and the estimate, resting on that many samples, that it would have
// completed within it.
const (
	AttrRefusedLeaseMs               = attribute.Key("deadline.refused.lease_ms")
	AttrRefusedCompletionProbability = attribute.Key("deadline.refused.completion_probability")
	AttrRefusedCompletionSamples     = attribute.Key("deadline.refused.completion_samples")
	// AttrAttemptHedge is true on an attempt started as a hedge, beside an
	// earlier attempt still running ([deadline.AttemptInfo.Hedge]); unset
	// otherwise.
	AttrAttemptHedge = attribute.Key("deadline.attempt.hedge")
	// AttrAttemptHedgeWinner is true on the attempt whose success won
	// against other attempts of the call
	// ([deadline.AttemptResult.HedgeWinner]); unset otherwise. The losers
	// end with ended_by "hedge_lost", without an error status.
	AttrAttemptHedgeWinner = attribute.Key("deadline.attempt.hedge_winner")
)

// BackoffEventName is the name of the event added to the call span for every
// backoff chosen, with the attempt number, delay, source, Retry-After asked
// and whether it fitted.
const BackoffEventName = "deadline.backoff"

// ms converts d to whole milliseconds, rounded to the nearest.
func ms(d time.Duration) int64 {
	return d.Round(time.Millisecond).Milliseconds()
}
