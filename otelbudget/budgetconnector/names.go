package budgetconnector

// Names of the metrics the connector exports (docs/attributes.md, "Fleet
// metrics", and docs/fleet.md say what each means). Every point carries the
// resource attribute service.name of the service the attempts came from
// and, but for the plans', the point attribute deadline.step.
const (
	// MetricCompleted is the durations of the completed attempts:
	// exponential histogram, unit ns, scale 5 (learn.Scale), zero
	// threshold 1024 ns (learn.Underflow), the durations above
	// learn.Overflow in bucket learn.MaxIndex+1; delta temporality: each
	// point holds the attempts received since the previous export, so
	// that another tier (or a backend) merges N connectors by adding
	// their points. Max is the longest attempt of the interval.
	MetricCompleted = "deadline.fleet.completed.duration"
	// MetricCensored is the points at which the censored attempts were
	// cut (their grant): as MetricCompleted.
	MetricCensored = "deadline.fleet.censored.duration"
	// MetricAttempts counts the attempts of the interval by
	// deadline.attempt.ended_by (completed, error, attempt_timeout,
	// deadline): delta, monotonic sum, unit {attempt}.
	MetricAttempts = "deadline.fleet.attempts"
	// MetricFirst and MetricLast are the end times of the interval's first
	// and last attempt: gauges, unit ms since the Unix epoch (an int, as
	// learn keeps them to the millisecond).
	MetricFirst = "deadline.fleet.first_sample"
	MetricLast  = "deadline.fleet.last_sample"

	// MetricCeiling is the suggested per-attempt ceiling
	// (learn.Suggestion.Ceiling): gauge, unit s; absent when no ceiling
	// could be suggested.
	MetricCeiling = "deadline.fleet.suggestion.ceiling"
	// MetricEstimate is the Kaplan–Meier quantile the ceiling derives
	// from (learn.Suggestion.Estimate), before the margin: gauge, unit s,
	// with the attribute deadline.fleet.quantile.
	MetricEstimate = "deadline.fleet.suggestion.estimate"
	// MetricRaiseAbove is, when too many attempts were cut to estimate
	// the quantile, the largest cut: the quantile is above it. Gauge,
	// unit s.
	MetricRaiseAbove = "deadline.fleet.suggestion.raise_above"
	// MetricCensoredShare is the share of the attempts cut by a limit:
	// gauge, unit 1.
	MetricCensoredShare = "deadline.fleet.suggestion.censored_share"
	// MetricSamples counts the attempts the suggestion rests on (completed
	// plus censored): gauge, unit {attempt}.
	MetricSamples = "deadline.fleet.suggestion.samples"
	// MetricWindowStart and MetricWindowEnd are the end times of the
	// first and the last attempt the suggestion rests on: gauges, unit ms
	// since the Unix epoch.
	MetricWindowStart = "deadline.fleet.suggestion.window_start"
	MetricWindowEnd   = "deadline.fleet.suggestion.window_end"
	// MetricPlanBudget is a configured plan's suggested run budget
	// (learn.BudgetSuggestion.Budget): gauge, unit s, with the attribute
	// deadline.plan; MetricPlanSuccess the success probability it gives
	// under learn's model, unit 1.
	MetricPlanBudget  = "deadline.fleet.suggestion.plan.budget"
	MetricPlanSuccess = "deadline.fleet.suggestion.plan.success"
)

// Names of the connector's own telemetry (through the Collector's
// component.TelemetrySettings, as every component's: its internal metrics,
// not the data it exports; documentation.md lists them).
const (
	// MetricSpans counts the spans the connector read, by
	// deadline.fleet.outcome: accepted, not_attempt (no deadline.step and
	// deadline.attempt.ended_by: not ours), unnamed_step, attribute_type,
	// not_recorded (canceled, panic, hedge_lost), bad_duration (negative
	// or above 24h, a grant out of that range: dropped), name_too_long
	// (service.name or deadline.step longer than max_name_length),
	// bad_time (an end after now + max_clock_skew, or before 1970: a
	// timestamp that wrapped).
	MetricSpans = "otelcol_deadlinebudget_spans"
	// MetricPoints counts the data points of the connector's own metrics
	// it merged (deadline.fleet.outcome accepted) or refused (rejected).
	MetricPoints = "otelcol_deadlinebudget_points"
	// MetricRefusedKeys counts the keys whose points of one export the
	// merge tier refused together (a part missing or twice, counts that do
	// not add up to the histograms, a window after now + max_clock_skew, a
	// name too long, counts past their bounds).
	MetricRefusedKeys = "otelcol_deadlinebudget_keys_refused"
	// MetricEvicted counts the keys evicted to stay within max_keys.
	MetricEvicted = "otelcol_deadlinebudget_keys_evicted"
	// MetricExpired counts the keys forgotten with nothing left in their
	// window.
	MetricExpired = "otelcol_deadlinebudget_keys_expired"
	// MetricKeys is the number of (service, step) keys kept.
	MetricKeys = "otelcol_deadlinebudget_keys"
)

// Attributes of the connector's metrics besides deadline.step and
// deadline.attempt.ended_by.
const (
	// AttrPlan names a configured plan (PlanConfig.Name).
	AttrPlan = "deadline.plan"
	// AttrQuantile is the quantile of a suggestion.
	AttrQuantile = "deadline.fleet.quantile"
	// AttrOutcome is what became of a span or a point read.
	AttrOutcome = "deadline.fleet.outcome"
)

// ScopeName is the instrumentation scope of the connector's metrics.
const ScopeName = "github.com/deadlinebudget/budget/otelbudget/budgetconnector"
