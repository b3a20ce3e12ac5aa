package budgetprop

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/otelbudget"
)

// The attribute keys [Annotate] sets beside the server ones of package
// otelbudget (deadline.server.*), which mean on a consumer's span what
// they mean on an HTTP server's. docs/attributes.md lists them all.
const (
	// AttrQueueTimeMs is a queued message's time between injection and
	// consumption as the producer's and the consumer's wall clocks show it
	// ([Extraction.QueueTime]), in milliseconds rounded to the nearest.
	// Set only by Consume, when the message carried both fields.
	AttrQueueTimeMs = attribute.Key("deadline.queue.time_ms")
	// AttrSkewExceeded is true when a queued message's expiry was later
	// than its relative budget allows by more than the skew allowance
	// ([Extraction.SkewExceeded]). Set only when true.
	AttrSkewExceeded = attribute.Key("deadline.queue.skew_exceeded")
)

// Attributes returns the span attributes of x, as the HTTP server
// composition (otelbudgethttp.NewHandler) sets them from its admission:
// deadline.server.inbound_budget_ms (the budget the fields gave, after the
// expiry rule, before the clamp), deadline.server.max_budget_ms,
// deadline.server.budget_ms (effective), deadline.server.limited_by,
// deadline.server.floor_ms, deadline.server.context_remaining_ms when an
// outer deadline existed, deadline.server.header_malformed when a field was
// malformed, and on a refusal deadline.server.refused,
// deadline.server.refusal and error.type "deadline_refused"; for a queued
// message, [AttrQueueTimeMs] and [AttrSkewExceeded]. An Extraction with no
// decision (no usable field, from Extract) gives only the malformed flag.
func Attributes(x Extraction) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 12)
	if x.Malformed {
		attrs = append(attrs, otelbudget.AttrServerHeaderMalformed.Bool(true))
	}
	a := x.Admission
	if a.Limit == 0 {
		return attrs
	}
	if a.Inbound.Present {
		attrs = append(attrs, otelbudget.AttrServerInboundBudgetMs.Int64(ms(a.Inbound.Budget)))
	}
	attrs = append(attrs,
		otelbudget.AttrServerMaxBudgetMs.Int64(ms(a.MaxBudget)),
		otelbudget.AttrServerBudgetMs.Int64(ms(a.Budget)),
		otelbudget.AttrServerLimitedBy.String(a.Limit.String()),
		otelbudget.AttrServerFloorMs.Int64(ms(a.Floor)))
	if a.HasOuter {
		attrs = append(attrs, otelbudget.AttrServerContextRemainingMs.Int64(ms(a.OuterRemaining)))
	}
	if x.Queued && x.HasSentBudget && x.HasExpiry {
		attrs = append(attrs, AttrQueueTimeMs.Int64(ms(x.QueueTime)))
	}
	if x.SkewExceeded {
		attrs = append(attrs, AttrSkewExceeded.Bool(true))
	}
	if a.Refused() {
		attrs = append(attrs,
			otelbudget.AttrServerRefused.Bool(true),
			otelbudget.AttrServerRefusal.String(a.Refusal.String()),
			semconv.ErrorTypeKey.String(otelbudget.ServerRefusalErrorType(a.Refusal)))
	}
	return attrs
}

// Annotate sets the attributes of the Extraction in ctx ([Attributes]) on
// the span in ctx, and on a refusal the span's status Error with the
// [RefusedError]'s message. It does nothing when ctx holds no Extraction
// or its span is not recording. [Propagator.Consume] calls it; a server
// that extracts with the propagator (otelhttp, otelgrpc) calls it in its
// handler, where the context holds the server span.
func Annotate(ctx context.Context) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	x, ok := FromContext(ctx)
	if !ok {
		return
	}
	span.SetAttributes(Attributes(x)...)
	if x.Refused() {
		span.SetStatus(codes.Error, (&RefusedError{Extraction: x}).Error())
	}
}

// ms converts d to whole milliseconds, rounded to the nearest, like every
// other _ms attribute of otelbudget.
func ms(d time.Duration) int64 { return d.Round(time.Millisecond).Milliseconds() }
