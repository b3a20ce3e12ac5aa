package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// serverMaxBudget is the most a provider grants a request, whatever the
// client's header says: a client can never buy a server more time than it
// allows.
const serverMaxBudget = 5 * time.Second

// provider is one of the "web capabilities" the agent calls, played by a
// handler that follows its scenario's script. It counts the requests it
// receives and remembers what they carried.
type provider struct {
	name   string
	script script

	mu   sync.Mutex
	seen []seenRequest
}

// seenRequest is what a provider saw of one request.
type seenRequest struct {
	Budget         time.Duration // the budget header's value, 0 if none
	IdempotencyKey string
	TraceParent    string
}

// requests returns what the provider saw, in order.
func (p *provider) requests() []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenRequest(nil), p.seen...)
}

// ServeHTTP plays the provider's reply to this request. It runs inside the
// budget middleware, so the request's context ends when the budget the
// client granted runs out: a hanging reply waits exactly that long.
func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	budget, _ := deadlinehttp.ParseBudget(r.Header.Get(deadlinehttp.DefaultHeader))
	_, _ = io.Copy(io.Discard, r.Body)
	ctx := r.Context()
	rep, n, err := p.play(ctx, seenRequest{
		Budget: budget, IdempotencyKey: r.Header.Get("Idempotency-Key"),
		TraceParent: r.Header.Get("Traceparent"),
	})
	if err != nil {
		abort()
	}
	if rep.failed() {
		if rep.retryAfter != "" {
			w.Header().Set("Retry-After", rep.retryAfter)
		}
		http.Error(w, http.StatusText(rep.status), rep.status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintln(w, p.answer(ctx, n))
}

// play records what the provider saw of request number n (counted from 1)
// and plays its scripted reply: the reply's latency drawn, then its work
// waited out, or ctx's end for a hanging reply. It returns ctx's error when
// ctx ended first: the budget ran out, or the client gave up. Each
// transport's handler (ServeHTTP, serveGRPC, serveMCP) answers with rep.
func (p *provider) play(ctx context.Context, seen seenRequest) (rep reply, n int, err error) {
	p.mu.Lock()
	p.seen = append(p.seen, seen)
	n = len(p.seen)
	p.mu.Unlock()

	rep = p.script.at(n)
	if rep.latency != nil {
		rep.work = rep.latency.draw()
	}
	if rep.hang {
		<-ctx.Done()
		return rep, n, ctx.Err()
	}
	if rep.work > 0 {
		t := time.NewTimer(rep.work)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return rep, n, ctx.Err()
		}
	}
	return rep, n, nil
}

// answer is the provider's successful answer to request n, the same JSON
// on every transport: its name, the request's number and the budget left
// in ctx ("none" without a deadline).
func (p *provider) answer(ctx context.Context, n int) string {
	left := "none"
	if d, ok := deadline.FromContext(ctx); ok {
		left = strconv.FormatInt(d.Remaining().Milliseconds(), 10)
	}
	return fmt.Sprintf(`{"provider":%q,"request":%d,"budget_left_ms":%q}`, p.name, n, left)
}

// abort drops the request without an answer: its budget ran out, nobody is
// waiting for it. Returning normally would send an empty 200 that a client
// whose timer fired late could take for a result. http.ErrAbortHandler is
// the net/http way to do this: the server closes the connection and logs
// nothing, and otelhttp still ends the server span (it defers End).
func abort() {
	panic(http.ErrAbortHandler)
}

// handler returns the provider wrapped as it is served, by
// otelbudgethttp's server composition: the otelhttp server span outermost
// (it extracts the W3C trace context, so the server span joins the client's
// trace, and carries the deadline.server.* attributes: the inbound budget,
// the clamp, the effective budget), then the budget middleware, which turns
// the inbound budget header into the request's deadline. The providers'
// metrics are not the demo's subject: their meter is a no-op.
func (p *provider) handler(tp trace.TracerProvider) (http.Handler, error) {
	return p.handlerOver(p, tp)
}

// handlerOver is handler with inner in the provider's place: the same
// server span and budget middleware around another way of answering.
func (p *provider) handlerOver(inner http.Handler, tp trace.TracerProvider) (http.Handler, error) {
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))
	h, err := otelbudgethttp.NewHandlerWith(inner, p.name, obs,
		[]otelhttp.Option{otelhttp.WithPropagators(propagation.TraceContext{})},
		deadlinehttp.WithMaxBudget(serverMaxBudget))
	if err != nil {
		return nil, fmt.Errorf("the %s provider's budget middleware: %w", p.name, err)
	}
	return h, nil
}

// providers are the loopback servers of one run, one per step.
type providers struct {
	byStep  map[string]*provider
	urls    map[string]string
	servers []*http.Server
	wg      sync.WaitGroup // the Serve goroutines

	mu       sync.Mutex
	serveErr []error // what Serve returned other than ErrServerClosed
}

// newProviders builds the providers of scenario sc, not yet serving.
func newProviders(sc scenario) *providers {
	ps := &providers{byStep: map[string]*provider{}, urls: map[string]string{}}
	for _, s := range agentPlan() {
		ps.byStep[s.name] = &provider{name: s.name, script: sc.script(s.name)}
	}
	return ps
}

// serve starts one HTTP server per provider on an ephemeral port of
// 127.0.0.1. Call close to stop them.
func (ps *providers) serve(tp trace.TracerProvider) error {
	for _, s := range agentPlan() {
		h, err := ps.byStep[s.name].handler(tp)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen on 127.0.0.1 for the %s provider: %w", s.name, err)
		}
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
		}
		ps.servers = append(ps.servers, srv)
		ps.urls[s.name] = "http://" + ln.Addr().String()
		ps.wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				ps.mu.Lock()
				ps.serveErr = append(ps.serveErr, fmt.Errorf("the %s provider stopped serving: %w", s.name, err))
				ps.mu.Unlock()
			}
		})
	}
	return nil
}

// close stops every server, waits for the handlers still running (a hanging
// reply ends with its lease, at most serverMaxBudget) and for the Serve
// goroutines to return.
func (ps *providers) close(ctx context.Context) error {
	var errs []error
	for _, srv := range ps.servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, err, srv.Close())
		}
	}
	ps.wg.Wait()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return errors.Join(append(errs, ps.serveErr...)...)
}
