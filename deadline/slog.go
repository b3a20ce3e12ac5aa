package deadline

import (
	"context"
	"log/slog"
	"time"
)

// LogHooks returns hooks that log to l (nil: slog.Default()) what the
// budget did, so that a slow run can be explained without rerunning it:
//
//   - each attempt's end at Debug (Info when it failed), with its number,
//     granted lease, remaining budget at its start, duration and what ended it;
//   - each backoff at Debug, with the delay, its source and whether it fit;
//   - the call's end at Info (Warn when it failed), with the stop reason, the
//     [Verdict] ([VerdictOf]), the attempts made and the budget left.
//
// Durations are logged as time.Duration values under keys ending in no unit
// (slog renders them). Attribute keys are stable:
//
//   - attempt lines ("deadline attempt"): step, attempt, granted, limited_by,
//     remaining, duration, ended_by, hedge (true) only for a hedge
//     ([AttemptInfo.Hedge]), hedge_winner (true) only for the attempt that
//     won against others ([AttemptResult.HedgeWinner]), probe (true) only
//     for a learned floor's probe ([AttemptInfo.Probe]), and retryable and
//     error only when the attempt failed (a hedge loser, [EndedHedgeLost],
//     did not fail: it is logged at Debug, without them);
//   - backoff lines ("deadline backoff"): step, attempt, delay, source,
//     remaining, fits, and retry_denied and retry_balance only when the
//     policy's retry budget was asked ([BackoffInfo.RetryBudget]), and
//     refused_learned, lease, completion_p and completion_samples only when
//     the learned floor refused the retry ([BackoffInfo.RefusedLearned]);
//   - call lines ("deadline call"): step, reason, verdict, attempts,
//     duration, remaining, hedges only when hedges started
//     ([CallResult.Hedges]), lease, completion_p and completion_samples only
//     when the learned floor refused ([ReasonRefusedLearned]), and error only
//     when the call failed.
//
// Its hooks keep no state, so they serve overlapping (hedged) attempts.
func LogHooks(l *slog.Logger) *Hooks {
	if l == nil {
		l = slog.Default()
	}
	return &Hooks{
		AttemptEnd: func(ctx context.Context, a AttemptInfo, r AttemptResult) {
			level := slog.LevelDebug
			if r.Err != nil && r.EndedBy != EndedHedgeLost {
				level = slog.LevelInfo
			}
			if !l.Enabled(ctx, level) {
				return
			}
			attrs := []slog.Attr{
				slog.String("step", a.Name), slog.Int("attempt", a.Number),
				slog.Duration("granted", a.Granted), slog.String("limited_by", a.LimitedBy.String()),
				slog.Duration("remaining", a.Remaining), slog.Duration("duration", r.Duration),
				slog.String("ended_by", r.EndedBy.String()),
			}
			if a.Hedge {
				attrs = append(attrs, slog.Bool("hedge", true))
			}
			if r.HedgeWinner {
				attrs = append(attrs, slog.Bool("hedge_winner", true))
			}
			if a.Probe {
				attrs = append(attrs, slog.Bool("probe", true))
			}
			if r.Err != nil && r.EndedBy != EndedHedgeLost {
				attrs = append(attrs, slog.Bool("retryable", r.Retryable), slog.String("error", r.Err.Error()))
			}
			l.LogAttrs(ctx, level, "deadline attempt", attrs...)
		},
		Backoff: func(ctx context.Context, b BackoffInfo) {
			attrs := []slog.Attr{
				slog.String("step", b.Name), slog.Int("attempt", b.Attempt),
				slog.Duration("delay", b.Delay), slog.String("source", b.Source.String()),
				slog.Duration("remaining", b.Remaining), slog.Bool("fits", b.Fits),
			}
			if b.RetryBudget {
				attrs = append(attrs, slog.Bool("retry_denied", b.RetryDenied), slog.Int("retry_balance", b.RetryBalance))
			}
			if b.RefusedLearned {
				attrs = append(attrs, slog.Bool("refused_learned", true))
				attrs = append(attrs, learnedAttrs(b.Lease, b.Estimate)...)
			}
			l.LogAttrs(ctx, slog.LevelDebug, "deadline backoff", attrs...)
		},
		CallEnd: func(ctx context.Context, r CallResult) {
			level := slog.LevelInfo
			attrs := []slog.Attr{
				slog.String("step", r.Name), slog.String("reason", r.Reason.String()),
				slog.String("verdict", VerdictOf(r).String()), slog.Int("attempts", r.Attempts), slog.Duration("duration", r.Duration),
				slog.Duration("remaining", r.Remaining),
			}
			if r.Hedges > 0 {
				attrs = append(attrs, slog.Int("hedges", r.Hedges))
			}
			if r.Reason == ReasonRefusedLearned {
				attrs = append(attrs, learnedAttrs(r.Lease, r.Estimate)...)
			}
			if r.Err != nil {
				level = slog.LevelWarn
				attrs = append(attrs, slog.String("error", r.Err.Error()))
			}
			l.LogAttrs(ctx, level, "deadline call", attrs...)
		},
	}
}

// learnedAttrs says why the learned floor refused an attempt.
func learnedAttrs(lease time.Duration, e Estimate) []slog.Attr {
	return []slog.Attr{slog.Duration("lease", lease), slog.Float64("completion_p", e.P), slog.Uint64("completion_samples", e.Samples)}
}
