package main

import (
	"context"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// executeGRPCInMemory is executeGRPC over bufconn: the providers' real gRPC
// servers (budget interceptor and otelgrpc server spans included) and the
// real client connections, in memory. grpc-go runs inside a synctest
// bubble over bufconn, so every duration comes out exact there.
func executeGRPCInMemory(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider) (outcome, error) {
	ps := newProviders(sc)
	targets := map[string]grpcTarget{}
	gs, err := ps.serveGRPC(tp, func(step string) (net.Listener, error) {
		ln := bufconn.Listen(1 << 20)
		targets[step] = grpcTarget{target: "passthrough:///" + step, opts: []grpc.DialOption{
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		}}
		return ln, nil
	})
	if err != nil {
		return outcome{}, err
	}
	rec, stepErr := playGRPC(ctx, sc, seed, budget, tp, mp, targets)
	return outcome{rec: rec, ps: ps, stepErr: stepErr}, gs.stop()
}

// playGRPCInMemory is playInMemory over gRPC. Call it inside a synctest
// bubble.
func playGRPCInMemory(t *testing.T, name string, seed uint64) (runRecord, *providers, *tracetest.SpanRecorder, error) {
	t.Helper()
	sc, err := findScenario(name)
	require.NoError(t, err)
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	out, err := executeGRPCInMemory(context.Background(), sc, seed, sc.budget, tp, metricnoop.NewMeterProvider())
	require.NoError(t, err)
	return out.rec, out.ps, sr, out.stepErr
}

// TestScenariosInMemoryGRPC plays every scenario over gRPC in virtual time:
// each ends exactly as over HTTP (the same scenarioCases: verdicts, stop
// reasons, attempts, requests received), and the design's guarantees hold,
// trace included.
func TestScenariosInMemoryGRPC(t *testing.T) {
	for _, tc := range scenarioCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec, ps, sr, _ := playGRPCInMemory(t, tc.name, defaultSeed)
				assert.Equal(t, tc.calls, callLines(rec))
				assert.Equal(t, tc.notRun, notRunLines(rec))
				assert.Equal(t, tc.requests, requestCounts(ps))
				sc, err := findScenario(tc.name)
				require.NoError(t, err)
				assert.NoError(t, check(sc, rec, ps))
				assertGuarantees(t, transportGRPC, sc, rec, ps, sr.Ended())
			})
		})
	}
}

// TestScenarioWaterfallSameOverGRPC: in virtual time the waterfall over gRPC
// is the HTTP one, bar for bar, for the scenarios whose attempts end the
// same way (the failed attempts of flaky and ratelimited say their gRPC
// code instead of their HTTP status).
func TestScenarioWaterfallSameOverGRPC(t *testing.T) {
	for _, name := range []string{"ok", "tight", "slow", "refused"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				httpRec, _, _, _ := playInMemory(t, name, defaultSeed)
				grpcRec, _, _, _ := playGRPCInMemory(t, name, defaultSeed)
				assert.Equal(t, renderPlain(t, httpRec), renderPlain(t, grpcRec))
			})
		})
	}
}

// TestScenarioTimingInMemoryGRPC checks, in virtual time, the leases the
// gRPC providers saw on the wire (grpc-timeout) and the pushback.
func TestScenarioTimingInMemoryGRPC(t *testing.T) {
	t.Run("ok: fetch's lease is its ceiling, on the wire", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, ps, _, err := playGRPCInMemory(t, "ok", defaultSeed)
			require.NoError(t, err)
			f := rec.Calls[1]
			require.Len(t, f.Attempts, 2)
			assert.Equal(t, deadline.EndedAttemptTimeout, f.Attempts[0].EndedBy)
			seen := ps.byStep["fetch"].requests()
			require.Len(t, seen, 2)
			for _, r := range seen {
				assert.Equal(t, 100*time.Millisecond, r.Budget, "grpc-timeout carried the 100ms ceiling")
			}
		})
	})
	t.Run("tight: the provider is told the lease cut by the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, ps, _, err := playGRPCInMemory(t, "tight", defaultSeed)
			require.Error(t, err)
			assert.ErrorIs(t, err, deadline.ErrDeadlineReached)
			assert.ErrorIs(t, err, deadline.ErrRefused)
			a := rec.Calls[1].Attempts[0]
			assert.Equal(t, deadline.LimitDeadline, a.LimitedBy)
			assert.Equal(t, 80*time.Millisecond, a.Granted)
			seen := ps.byStep["fetch"].requests()
			require.Len(t, seen, 1)
			assert.Equal(t, 80*time.Millisecond, seen[0].Budget, "grpc-timeout carried the lease")
		})
	})
	t.Run("ratelimited: the first pushback is waited in full, the second does not fit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, _, _, err := playGRPCInMemory(t, "ratelimited", defaultSeed)
			require.Error(t, err)
			assert.ErrorIs(t, err, deadline.ErrRetryAfterExceedsBudget)
			f := rec.Calls[1]
			assertThrottledWaits(t, f)
			assert.Equal(t, "ResourceExhausted", f.Attempts[0].Code)
		})
	})
	t.Run("flaky: extract is retried with the same idempotency key", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, ps, _, err := playGRPCInMemory(t, "flaky", defaultSeed)
			require.NoError(t, err)
			assert.Equal(t, "Unavailable", rec.Calls[2].Attempts[0].Code)
			seen := ps.byStep["extract"].requests()
			require.Len(t, seen, 2)
			assert.NotEmpty(t, seen[0].IdempotencyKey)
			assert.Equal(t, seen[0].IdempotencyKey, seen[1].IdempotencyKey)
		})
	})
}

// TestGRPCTraceShape: over gRPC the trace is call span > otelgrpc CLIENT
// span > otelgrpc SERVER span, the attempt attributes on the CLIENT spans
// and the server's budget on the SERVER spans.
func TestGRPCTraceShape(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, sr, err := playGRPCInMemory(t, "ok", defaultSeed)
		require.NoError(t, err)
		spans := sr.Ended()
		byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, s := range spans {
			byID[s.SpanContext().SpanID()] = s
		}
		servers := spansOfKind(spans, trace.SpanKindServer)
		require.Len(t, servers, 4, "search, fetch twice, extract")
		for _, s := range servers {
			assert.Contains(t, s.Name(), grpcService+"/", "otelgrpc names the span by the method")
			for _, k := range []string{"deadline.server.inbound_budget_ms", "deadline.server.max_budget_ms", "deadline.server.budget_ms", "deadline.server.limited_by", "deadline.server.floor_ms"} {
				_, ok := attr(s, attribute.Key(k))
				assert.True(t, ok, "server span %s carries %s", s.Name(), k)
			}
			client := byID[s.Parent().SpanID()]
			require.NotNil(t, client, "server span %s has its CLIENT span", s.Name())
			assert.Equal(t, trace.SpanKindClient, client.SpanKind())
			granted, _ := attr(client, otelbudget.AttrAttemptGrantedMs)
			inbound, _ := attr(s, otelbudget.AttrServerInboundBudgetMs)
			assert.Equal(t, granted.AsInt64(), inbound.AsInt64(), "in virtual time the server is told exactly the lease")
			assert.Equal(t, s.Name(), client.Name(), "otelgrpc names both by the method")
			for _, k := range []string{"deadline.attempt.number", "deadline.attempt.granted_ms", "deadline.attempt.remaining_ms", "deadline.attempt.limited_by", "deadline.attempt.ended_by"} {
				_, ok := attr(client, attribute.Key(k))
				assert.True(t, ok, "client span %s carries %s", client.Name(), k)
			}
			_, resend := attr(client, "http.request.resend_count")
			assert.False(t, resend, "no resend count on a gRPC attempt")
			call := byID[client.Parent().SpanID()]
			require.NotNil(t, call, "client span %s has its call span", client.Name())
			assert.Equal(t, trace.SpanKindInternal, call.SpanKind())
			_, ok := attr(call, otelbudget.AttrVerdict)
			assert.True(t, ok, "the call span %s carries the verdict", call.Name())
		}
	})
}

// TestScenariosLoopbackGRPC runs every scenario over gRPC on real loopback,
// outside any bubble, and checks what holds whatever the scheduling (see
// TestScenariosLoopback).
func TestScenariosLoopbackGRPC(t *testing.T) {
	scenariosLoopback(t, transportGRPC, executeGRPC)
}
