// Package budgetconnector is an OpenTelemetry Collector connector
// (`deadlinebudget`) that learns per-attempt ceilings for a whole fleet from
// the attempt spans of package otelbudget, and an extension
// (`deadlinebudget_opamp`) that serves them back to every client over OpAMP.
//
// Traces → metrics: each attempt span (deadline.step and
// deadline.attempt.ended_by, read by otelbudget.ReadAttemptSample, the rule
// budgetadvise uses too) is added to its (service.name, deadline.step) key:
// the durations of the completed attempts and the cuts of the censored ones,
// in learn's buckets (an exponential histogram at learn.Scale), kept sparse.
// At every export interval the connector exports, per key, the delta of both
// histograms and of the counts since the previous export (delta temporality:
// N connectors' exports add up exactly), and the suggestions learn derives
// from everything received (learn.Suggest: the ceiling, the Kaplan–Meier
// quantile, the censored share, the samples, the window; learn's
// SuggestBudget for the configured plans).
//
// Metrics → metrics: the connector merges another connector's histogram
// metrics into its keys, so that a gateway tier of Collectors (fed by agent
// Collectors, one service to one gateway by the loadbalancing exporter)
// holds the fleet's histograms, exactly those one connector seeing every
// span would hold, and suggests from them.
//
// Bad input is counted, never fatal: spans without our attributes, absurd
// durations (negative, above a day), points of ours in another form; the
// keys are bounded (max_keys, least recently updated evicted). The names of
// the metrics are the Metric constants; docs/fleet.md shows the whole loop
// and the Collector configuration.
package budgetconnector
