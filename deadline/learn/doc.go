// Package learn derives per-attempt ceilings and run budgets from the
// attempts a process actually made.
//
// A [Recorder] is fed by [deadline.Hooks] ([Recorder.Hooks], composable with
// [deadline.Compose]). Per step ([deadline.Policy.Name]) it keeps the
// durations of the attempts that completed (successes, and errors returned
// before any limit) and the points at which the others were cut by a limit
// (censored: a ceiling timeout is "longer than the ceiling", a deadline cut
// "longer than its grant"); canceled and panicked attempts are not
// recorded. The histogram is OpenTelemetry's base-2 exponential histogram at
// a fixed scale ([Scale] 5: 32 buckets per doubling), so a duration read back
// is within [RelativeError] (1.08%) of the recorded ones and the buckets are
// those of an OpenTelemetry exponential histogram metric at that scale.
// Memory is fixed: about 8.7 KiB per step, for at most [MaxSteps] steps and
// one overflow series. Recording takes no lock and does not allocate.
//
// [Recorder.Suggest] turns a step's samples into a ceiling: a quantile
// (default p99) of the durations, estimated with the Kaplan–Meier
// estimator so that cut attempts count as "longer than", times a margin
// (default 1.2), clamped to bounds. It refuses below a minimum sample count
// ([ErrNotEnoughSamples]) and says when the quantile is hidden above the
// cuts ([ErrCensored]: raise the ceiling above the largest cut).
// [Recorder.SuggestBudget] turns a plan of steps into a run budget with the
// success probability it assumes. [Recorder.Live] makes the recorder a
// [deadline.CeilingSource] whose ceilings follow the recorded durations.
//
// docs/ceilings.md explains the model and its limits. The package imports
// the standard library and package deadline only.
package learn
