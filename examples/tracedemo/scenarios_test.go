package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// TestScenariosLoopback runs every scenario for real, on loopback HTTP with
// the article's seed, outside any synctest bubble, and checks what the
// design guarantees whatever the scheduling (see assertGuarantees).
//
// It does not check each scenario's exact outcome: that depends on real
// timers, and a loaded machine (the race detector, parallel test binaries,
// other processes) delays them by tens of milliseconds, more than some
// scenarios' margins: extract's provider works 150ms against its 250ms
// ceiling, fetch's retry 10ms against 100ms, and a late response turns an
// ok step into a timed-out attempt and a retry. TestScenariosInMemory
// checks the exact outcomes in virtual time, with the same handlers and
// transports.
func TestScenariosLoopback(t *testing.T) {
	scenariosLoopback(t, transportHTTP, execute)
}

// scenariosLoopback runs every scenario with exec (execute over HTTP,
// executeGRPC over gRPC) on real loopback and checks what holds whatever
// the scheduling.
func scenariosLoopback(t *testing.T, transport string, exec func(context.Context, scenario, uint64, time.Duration, trace.TracerProvider, metric.MeterProvider) (outcome, error)) {
	for _, tc := range scenarioCases {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := findScenario(tc.name)
			require.NoError(t, err)
			sr := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
			out, err := exec(context.Background(), sc, defaultSeed, sc.budget, tp, metricnoop.NewMeterProvider())
			require.NoError(t, err)
			assertGuarantees(t, transport, sc, out.rec, out.ps, sr.Ended())
			if tc.name == "refused" {
				// Nothing in it depends on timing: the budget is below the
				// floor from the start.
				assert.Equal(t, tc.calls, callLines(out.rec))
				assert.Equal(t, tc.requests, requestCounts(out.ps))
				assert.NoError(t, check(sc, out.rec, out.ps))
			}
		})
	}
}

// neverOK lists, per scenario, the steps that cannot end ok whatever the
// scheduling, because their provider's script never answers 200 within a
// lease the step can get.
var neverOK = map[string][]string{
	// 90ms of work; the lease is at most 110ms, less search's 10ms of work,
	// less the 20ms floor: 80ms.
	"tight": {"fetch"},
	// 150ms of work against a 100ms ceiling.
	"slow": {"fetch"},
	// 429 on every request.
	"ratelimited": {"fetch"},
}

// assertGuarantees checks what the design guarantees of a run of sc over
// transport (transportHTTP or transportGRPC) whatever the scheduling, real
// time or virtual: the plan's accounting, the
// budget rules on every lease, the wire and the trace agreeing, and the
// steps that cannot succeed by their provider's script.
func assertGuarantees(t *testing.T, transport string, sc scenario, rec runRecord, ps *providers, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	plan := agentPlan()

	// The plan: each step in order has a call, or was not run because an
	// earlier step failed for a reason other than the budget.
	require.Equal(t, len(plan), len(rec.Calls)+len(rec.NotRun), "every step is either called or not run")
	for i, c := range rec.Calls {
		assert.Equal(t, plan[i].name, c.Name, "call %d", i+1)
	}
	if len(rec.NotRun) > 0 {
		last := rec.Calls[len(rec.Calls)-1]
		assert.False(t, last.Reason == deadline.ReasonSuccess || last.Reason.Budget(), "%s stopped the plan with %s, which is not a budget stop", last.Name, last.Reason)
		for j, n := range rec.NotRun {
			assert.Equal(t, plan[len(rec.Calls)+j].name, n.Name)
			assert.Equal(t, last.Name, n.After)
		}
	}

	// The budget rules, on every call and lease.
	for _, c := range rec.Calls {
		assert.Equal(t, c.Started, len(c.Attempts), "%s: every attempt started has ended", c.Name)
		assert.LessOrEqual(t, c.Started, c.MaxAttempts, "%s: attempts within the policy's", c.Name)
		for i, a := range c.Attempts {
			assert.Equal(t, i+1, a.Number, "%s: attempts are numbered from 1", c.Name)
			assert.Positive(t, a.Granted, "%s #%d: a lease is never empty: below the floor the call is refused", c.Name, a.Number)
			assert.LessOrEqual(t, a.Granted, c.Ceiling, "%s #%d: a lease never exceeds its ceiling", c.Name, a.Number)
			assert.LessOrEqual(t, a.Start+a.Granted, rec.Budget-rec.Floor, "%s #%d: a lease never reaches into the floor", c.Name, a.Number)
		}
		if c.Reason == deadline.ReasonSuccess {
			require.NotEmpty(t, c.Attempts, c.Name)
			assert.Equal(t, deadline.EndedCompleted, c.Attempts[len(c.Attempts)-1].EndedBy, "%s: success is its last attempt's", c.Name)
		}
	}
	for _, name := range neverOK[sc.name] {
		for _, c := range rec.Calls {
			if c.Name == name {
				assert.NotEqual(t, deadline.VerdictOK, c.Verdict, "%s: its provider never answers in time", name)
			}
		}
	}
	if sc.name == "ok" && len(rec.Calls) > 1 && len(rec.Calls[1].Attempts) > 0 {
		// The fetch provider's first request hangs: fetch's first attempt
		// either is that request or never reached the provider.
		assert.NotEqual(t, deadline.EndedCompleted, rec.Calls[1].Attempts[0].EndedBy, "fetch #1 hangs until its lease ends")
	}

	// The trace: one for the whole run; a call span per call, parent of
	// its attempts' CLIENT spans; a SERVER span per request received,
	// child of the CLIENT span that sent it.
	require.NotEmpty(t, spans)
	traceID := spans[0].SpanContext().TraceID()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		assert.Equal(t, traceID, s.SpanContext().TraceID(), "span %s is in the run's trace", s.Name())
		byID[s.SpanContext().SpanID()] = s
	}
	calls := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spansOfKind(spans, trace.SpanKindInternal) {
		if _, ok := attr(s, otelbudget.AttrVerdict); ok {
			calls[s.Name()] = s
		}
	}
	assert.Len(t, calls, len(rec.Calls), "one call span per call")
	clients := map[string][]sdktrace.ReadOnlySpan{}
	for _, c := range spansOfKind(spans, trace.SpanKindClient) {
		step, ok := attr(c, otelbudget.AttrStep)
		require.True(t, ok, "client span %s carries deadline.step", c.Name())
		clients[step.AsString()] = append(clients[step.AsString()], c)
		call, ok := calls[step.AsString()]
		require.True(t, ok, "client span of %s has its call span", step.AsString())
		assert.Equal(t, call.SpanContext().SpanID(), c.Parent().SpanID(), "the call span parents its attempts")
		for _, k := range []attribute.Key{otelbudget.AttrAttemptNumber, otelbudget.AttrAttemptGrantedMs, otelbudget.AttrAttemptRemainingMs, otelbudget.AttrAttemptLimitedBy, otelbudget.AttrAttemptEndedBy} {
			_, ok := attr(c, k)
			assert.True(t, ok, "client span of %s carries %s", step.AsString(), k)
		}
		n, _ := attr(c, otelbudget.AttrAttemptNumber)
		resend, ok := attr(c, "http.request.resend_count")
		if transport == transportGRPC {
			// RPC has no resend count: deadline.attempt.number says it,
			// and no http.* attribute is on a gRPC attempt.
			for _, kv := range c.Attributes() {
				assert.NotContains(t, string(kv.Key), "http.", "gRPC client span of %s #%d", step.AsString(), n.AsInt64())
			}
			continue
		}
		if n.AsInt64() == 1 {
			assert.False(t, ok, "%s #1 is not a resend", step.AsString())
		} else {
			assert.Equal(t, n.AsInt64()-1, resend.AsInt64(), "%s #%d is resend %d", step.AsString(), n.AsInt64(), n.AsInt64()-1)
		}
	}
	received := 0
	for _, c := range rec.Calls {
		assert.Len(t, clients[c.Name], c.Started, "%s: one CLIENT span per attempt", c.Name)
		seen := ps.byStep[c.Name].requests()
		received += len(seen)
		// A request whose attempt ended before the provider read it is
		// never received; none is received twice.
		assert.LessOrEqual(t, len(seen), c.Started, "%s: the provider received at most one request per attempt", c.Name)
		var most time.Duration
		for _, a := range c.Attempts {
			most = max(most, a.Granted)
		}
		for _, r := range seen {
			assert.Positive(t, r.Budget, "%s: every request carries its lease", c.Name)
			assert.LessOrEqual(t, r.Budget, most.Truncate(time.Millisecond)+time.Millisecond, "%s: the header carries a lease the client granted, rounded up", c.Name)
			assert.Contains(t, r.TraceParent, traceID.String(), "%s: the request carries the run's trace", c.Name)
			assert.Equal(t, seen[0].IdempotencyKey, r.IdempotencyKey, "%s: every attempt carries the same Idempotency-Key", c.Name)
		}
	}
	for _, n := range rec.NotRun {
		assert.Empty(t, ps.byStep[n.Name].requests(), "%s was not run: its provider received nothing", n.Name)
	}
	servers := spansOfKind(spans, trace.SpanKindServer)
	assert.Len(t, servers, received, "one SERVER span per request received")
	for _, s := range servers {
		parent, ok := byID[s.Parent().SpanID()]
		require.True(t, ok, "server span %s has its parent in the trace", s.Name())
		assert.Equal(t, trace.SpanKindClient, parent.SpanKind(), "server span %s is a child of the client span that sent it", s.Name())
		assert.True(t, s.Parent().IsRemote(), "the parent came over the wire")
		// The server composition shows the budget the request arrived
		// with: the client's lease, rounded up to whole milliseconds, is
		// the inbound budget, and below the providers' maximum it is the
		// effective one.
		granted, ok := attr(parent, otelbudget.AttrAttemptGrantedMs)
		require.True(t, ok, "client span %s has its lease", parent.Name())
		inbound, ok := attr(s, otelbudget.AttrServerInboundBudgetMs)
		require.True(t, ok, "server span %s has the inbound budget", s.Name())
		if transport == transportGRPC {
			// grpc-timeout travels as a deadline: the server sees what is
			// left of the lease when the RPC arrives (exactly the lease in
			// virtual time, a little less on loopback, more so on the
			// connection's first RPC, which dials).
			assert.Positive(t, inbound.AsInt64(), "server span %s", s.Name())
			assert.LessOrEqual(t, inbound.AsInt64(), granted.AsInt64()+1, "server span %s: inbound budget is at most the client's lease", s.Name())
		} else {
			assert.InDelta(t, granted.AsInt64(), inbound.AsInt64(), 1, "server span %s: inbound budget = the client's lease", s.Name())
		}
		effective, _ := attr(s, otelbudget.AttrServerBudgetMs)
		assert.Equal(t, inbound.AsInt64(), effective.AsInt64(), "server span %s: below the maximum the inbound budget is the effective one", s.Name())
		limited, _ := attr(s, otelbudget.AttrServerLimitedBy)
		assert.Equal(t, "header", limited.AsString(), "server span %s", s.Name())
	}
}

// spansOfKind returns the spans of kind k.
func spansOfKind(spans []sdktrace.ReadOnlySpan, k trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == k {
			out = append(out, s)
		}
	}
	return out
}

// attr returns the value of key on s, and whether it is set.
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}
