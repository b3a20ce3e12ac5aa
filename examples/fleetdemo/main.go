// Command fleetdemo shows the fleet loop on loopback, in one process: a
// real OpenTelemetry Collector with the deadlinebudget connector and its
// OpAMP extension (built in-process, as otelbudget/budgetconnector/test's
// fleettest builds it), fifty clients whose calls (deadline.Do, observed by
// otelbudget) send their attempt spans to it over OTLP, the ceilings it
// computes exported as metrics, and a client started cold that picks the
// fleet's ceilings up over OpAMP before its first call.
//
// Usage:
//
//	make fleetdemo                # or: cd examples/fleetdemo && go run .
//	cd examples/fleetdemo && go run . -clients 50 -calls 60 -interval 1s
//
// docs/fleet.md explains what it prints.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/test/fleettest"
	"github.com/deadlinebudget/budget/otelbudget/budgetopamp"
)

func main() {
	err := run(context.Background(), os.Stdout, os.Args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "fleetdemo:", err)
		os.Exit(1)
	}
}

// service is the fleet's service.name.
const service = "checkout"

// steps are the plan's steps: their median latency (log-normal, σ 0.5)
// and the configured ceiling, which cuts the slowest fetches: 2.7 % of
// them, fewer than the 5 % above the p95 the connector suggests from, so
// that the p95 is found although the ceiling binds. (With a 20 ms median,
// 5.8 % of these draws were cut: the p95 lay above the ceiling, and the
// connector rightly suggests no ceiling then, only raise_above;
// TestFetchP95IsFound.)
var steps = []struct {
	name    string
	median  time.Duration
	ceiling time.Duration
}{{"search", 8 * time.Millisecond, 100 * time.Millisecond}, {"fetch", 17 * time.Millisecond, 45 * time.Millisecond}}

// quantile is the quantile the connector suggests from.
const quantile = 0.95

// newLatency is client id's latency source: log-normal (σ 0.5) around a
// median, from a generator seeded by id, so that every run draws the same.
func newLatency(id int) func(median time.Duration) time.Duration {
	rng := rand.New(rand.NewPCG(uint64(id), 42))
	var mu sync.Mutex
	return func(median time.Duration) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(float64(median) * math.Exp(0.5*rng.NormFloat64()))
	}
}

func run(ctx context.Context, out io.Writer, args []string) error {
	fs := flag.NewFlagSet("fleetdemo", flag.ContinueOnError)
	clients := fs.Int("clients", 50, "simulated client processes")
	calls := fs.Int("calls", 30, "plan runs per client")
	interval := fs.Duration("interval", time.Second, "the connector's export interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clients < 1 || *calls < 1 || *interval <= 0 {
		return errors.New("-clients and -calls must be >= 1, -interval > 0")
	}
	col, err := fleettest.Start(ctx, fleettest.Options{ExportInterval: *interval, Connector: fmt.Sprintf("suggest:\n  quantile: %g\n  min_samples: 200", quantile)})
	if err != nil {
		return err
	}
	defer func() { _ = col.Shutdown() }()
	fmt.Fprintf(out, "Collector on loopback: OTLP %s, OpAMP %s, export every %s\n", col.OTLP, col.OpAMP, *interval)

	began := time.Now()
	attempts, err := runClients(ctx, col.OTLP, *clients, *calls)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d clients ran %d plans each in %s; their %d attempt spans went to the Collector\n", *clients, *calls, time.Since(began).Round(time.Millisecond), sum(attempts))

	last, err := waitExport(ctx, col, attempts, 10**interval)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "the connector's suggestions (deadline.fleet.suggestion.*):")
	report(out, last)

	// A process starting cold: no samples of its own.
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Quantile: 0.95, Max: time.Second}})
	if err != nil {
		return err
	}
	_, has := live.Ceiling("fetch")
	fmt.Fprintf(out, "a new client starts cold (a live ceiling for fetch: %v) and connects to OpAMP\n", has)
	start := time.Now()
	client, err := budgetopamp.Start(ctx, col.OpAMP, live, budgetopamp.WithServiceName(service))
	if err != nil {
		return err
	}
	defer func() { _ = client.Stop(context.Background()) }()
	select {
	case <-client.FirstApplied():
	case <-time.After(2**interval - time.Since(start)):
		return fmt.Errorf("the fleet's ceilings did not arrive within two export intervals (%s): %+v", 2**interval, client.Status())
	}
	fmt.Fprintf(out, "it applied the fleet's ceilings %s after it started (within two export intervals: %s)\n", time.Since(start).Round(time.Millisecond), 2**interval)
	p := deadline.Policy{Name: "fetch", MaxAttempts: 2, AttemptTimeout: time.Second, Ceiling: live, Hooks: rec.Hooks()}
	_, err = deadline.Do(ctx, deadline.New(2*time.Second), p, func(_ context.Context, a deadline.AttemptInfo) (int, error) {
		fmt.Fprintf(out, "its first fetch attempt: ceiling %s (%s, p%g of the fleet's attempts × 1.2)\n", a.Ceiling.Round(10*time.Microsecond), a.LimitedBy, 100*a.CeilingQuantile)
		return 0, nil
	})
	return err
}

// runClients runs clients processes' worth of calls: each its own
// TracerProvider exporting to the Collector over OTLP/HTTP, its own
// observer, calls plan runs of the steps. It returns once every client's
// spans are exported (each TracerProvider shut down), with the attempts
// made per "service/step": each is one attempt span, one sample.
func runClients(ctx context.Context, otlp string, clients, calls int) (map[string]int, error) {
	var wg sync.WaitGroup
	var counts [2]atomic.Int64 // by step
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			if err := runClient(ctx, otlp, c, calls, &counts); err != nil {
				errs <- fmt.Errorf("client %d: %w", c, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	attempts := map[string]int{}
	for i, s := range steps {
		attempts[service+"/"+s.name] = int(counts[i].Load())
	}
	return attempts, errors.Join(collect(errs)...)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

func runClient(ctx context.Context, otlp string, id, calls int, counts *[2]atomic.Int64) error {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(otlp+"/v1/traces"))
	if err != nil {
		return err
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service), semconv.ServiceInstanceID(fmt.Sprintf("client-%02d", id)))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
	latency := newLatency(id)
	for range calls {
		d := deadline.New(time.Second)
		for i, s := range steps {
			p := deadline.Policy{Name: s.name, MaxAttempts: 3, AttemptTimeout: s.ceiling, Hooks: obs.Hooks()}
			_, err := deadline.Do(ctx, d, p, func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
				counts[i].Add(1)
				t := time.NewTimer(latency(s.median))
				defer t.Stop()
				select {
				case <-t.C:
					return struct{}{}, nil
				case <-ctx.Done():
					return struct{}{}, ctx.Err()
				}
			})
			if err != nil {
				break // the run stops: the budget or the attempts ran out
			}
		}
	}
	return tp.Shutdown(ctx)
}

// waitExport waits until the Collector has exported suggestions that rest
// on every attempt the clients made (want, by "service/step") and returns
// that export alone: what the connector published to OpAMP with it. An
// earlier export's suggestion is not carried over (a step that had a
// ceiling while clients were sending may have none once every attempt is
// in: too many cut to find its quantile).
func waitExport(ctx context.Context, col *fleettest.Collector, want map[string]int, limit time.Duration) ([]pmetric.Metrics, error) {
	timeout := time.After(limit)
	var got map[string]float64
	for {
		batches, changed := col.Metrics.Batches()
		if n := len(batches); n > 0 {
			last := batches[n-1:]
			got = fleettest.Gauges(last, budgetconnector.MetricSamples)
			all := true
			for k, n := range want {
				all = all && got[k] == float64(n)
			}
			if all {
				return last, nil
			}
		}
		select {
		case <-changed:
		case <-timeout:
			return nil, fmt.Errorf("no export from every attempt after %s (samples: %v, sent: %v)", limit, got, want)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// report prints each step's suggestion from one export; a step without a
// ceiling says why (too many attempts cut to find the quantile: raise the
// ceiling above raise_above).
func report(out io.Writer, export []pmetric.Metrics) {
	ceilings := fleettest.Gauges(export, budgetconnector.MetricCeiling)
	samples := fleettest.Gauges(export, budgetconnector.MetricSamples)
	share := fleettest.Gauges(export, budgetconnector.MetricCensoredShare)
	est := fleettest.Gauges(export, budgetconnector.MetricEstimate)
	raise := fleettest.Gauges(export, budgetconnector.MetricRaiseAbove)
	for _, s := range steps {
		k := service + "/" + s.name
		if c, ok := ceilings[k]; ok {
			fmt.Fprintf(out, "  %-7s ceiling %7.2fms  p95 %6.2fms  censored %4.1f%%  from %d attempts (configured ceiling %s)\n",
				s.name, 1000*c, 1000*est[k], 100*share[k], int(samples[k]), s.ceiling)
		} else {
			fmt.Fprintf(out, "  %-7s no ceiling: censored %4.1f%% (above %g%%), raise above %.2fms  from %d attempts (configured ceiling %s)\n",
				s.name, 100*share[k], 100*(1-quantile), 1000*raise[k], int(samples[k]), s.ceiling)
		}
	}
}
