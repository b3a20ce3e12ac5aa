package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"testing"
	"time"

	mgclient "github.com/mark3labs/mcp-go/client"
	mgtransport "github.com/mark3labs/mcp-go/client/transport"
	mgmcp "github.com/mark3labs/mcp-go/mcp"
	mgserver "github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcpgo"
)

// An agent's tool call through each SDK on its in-process transport
// (mcp-go's in-process client, the go-sdk's in-memory transports): bare;
// with the budget on the client only ("client": what the agent's call
// adds); on both sides ("budget"), no observer; with the spans (a real
// tracer provider that records and exports nothing); and bare under a plain
// context.WithTimeout ("timeout"); and the budget by hand ("meta"): the
// bare call under a plain context.WithTimeout with the budget's _meta member
// (mcpbudget.MetaKey and a number) set in the SDK's own params, what a
// caller pays who sends the budget without the adapter (a _meta built once
// and reused: less than a caller building one per call pays). On mcp-go
// also "raw" and "wire": the bare call under a plain context.WithTimeout
// with the params the SDK wrote once sent as they are, without and with
// the budget's _meta member (see fixedParams).
// docs/mcp.md quotes the figures.
func BenchmarkToolCall(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))

	for _, mode := range []string{"bare", "client", "budget", "spans", "timeout", "meta", "raw", "wire"} {
		for _, sdkName := range []string{"mcp-go", "go-sdk"} {
			if sdkName == "go-sdk" && (mode == "raw" || mode == "wire") {
				continue // the go-sdk's params are typed: no raw form to send
			}
			b.Run(sdkName+"/"+mode, func(b *testing.B) {
				call := toolCaller(b, sdkName, mode, obs)
				ctx := context.Background()
				b.ReportAllocs()
				// allocs/op is rounded down; mallocs/op keeps the fraction
				// (calls whose request ID is below 256 box it for free).
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				for b.Loop() {
					ctx := deadline.NewContext(ctx, deadline.New(time.Minute))
					f := call
					if mode == "timeout" || mode == "meta" || mode == "raw" || mode == "wire" {
						f = func(ctx context.Context) error { return callWithTimeout(ctx, call) }
					}
					if err := f(ctx); err != nil {
						b.Fatal(err)
					}
				}
				runtime.ReadMemStats(&m1)
				b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "mallocs/op")
			})
		}
	}
}

// callWithTimeout is the bare call under a plain context deadline, what a
// caller without the budget writes to bound it ("timeout"): the reference
// for what a deadline costs on the in-process transports whatever sets it.
func callWithTimeout(ctx context.Context, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return call(ctx)
}

// BenchmarkToolCallOverBare measures what the budget on the client adds to
// one tool call, per SDK: the bare call, the call with the budget on the
// client, the bare call under a plain context.WithTimeout, and the budget
// by hand (see BenchmarkToolCall) alternate in blocks of 64 calls, their order rotating, and each block is timed on the
// process's CPU clock (GC workers included; time other processes hold the
// CPU excluded) and on the wall clock. It reports each one's CPU ns per
// call, and the client's and the timeout's difference to the bare call per
// call with the half width of its 95% confidence interval over the rounds
// of blocks, and the client's difference to the budget by hand. Its own
// ns/op is one round.
func BenchmarkToolCallOverBare(b *testing.B) {
	const block = 64
	for _, sdkName := range []string{"mcp-go", "go-sdk"} {
		b.Run(sdkName, func(b *testing.B) {
			bare := toolCaller(b, sdkName, "bare", nil)
			byHand := toolCaller(b, sdkName, "meta", nil)
			calls := []func(context.Context) error{
				bare,
				toolCaller(b, sdkName, "client", nil),
				func(ctx context.Context) error { return callWithTimeout(ctx, bare) },
				func(ctx context.Context) error { return callWithTimeout(ctx, byHand) },
			}
			if sdkName == "mcp-go" {
				raw, wire := toolCaller(b, sdkName, "raw", nil), toolCaller(b, sdkName, "wire", nil)
				calls = append(calls,
					func(ctx context.Context) error { return callWithTimeout(ctx, raw) },
					func(ctx context.Context) error { return callWithTimeout(ctx, wire) })
			}
			ctx := context.Background()
			cpu := make([]time.Duration, len(calls))
			c, w := make([]time.Duration, len(calls)), make([]time.Duration, len(calls))
			// per round: client - bare (CPU, wall), timeout - bare, by hand -
			// bare, client - by hand, and on mcp-go wire - bare, wire - raw
			// and client - wire (CPU)
			var dc, dw, tc, hc, ch, wb, wr, cw []float64
			n := 0
			for b.Loop() {
				for i := range calls {
					k := (i + n) % len(calls)
					c0, w0 := processCPU(), time.Now()
					for range block {
						if err := calls[k](deadline.NewContext(ctx, deadline.New(time.Minute))); err != nil {
							b.Fatal(err)
						}
					}
					c[k], w[k] = processCPU()-c0, time.Since(w0)
				}
				for k := range c {
					cpu[k] += c[k]
				}
				dc = append(dc, float64(c[1]-c[0])/block)
				dw = append(dw, float64(w[1]-w[0])/block)
				tc = append(tc, float64(c[2]-c[0])/block)
				hc = append(hc, float64(c[3]-c[0])/block)
				ch = append(ch, float64(c[1]-c[3])/block)
				if len(calls) == 6 {
					wb = append(wb, float64(c[5]-c[0])/block)
					wr = append(wr, float64(c[5]-c[4])/block)
					cw = append(cw, float64(c[1]-c[5])/block)
				}
				n++
			}
			calls0 := float64(n * block)
			b.ReportMetric(float64(cpu[0])/calls0, "bare-cpu-ns/call")
			b.ReportMetric(float64(cpu[1])/calls0, "client-cpu-ns/call")
			for _, d := range []struct {
				name string
				xs   []float64
			}{{"delta-cpu", dc}, {"delta-wall", dw}, {"timeout-delta-cpu", tc}, {"meta-delta-cpu", hc}, {"client-over-meta-cpu", ch},
				{"wire-delta-cpu", wb}, {"member-cpu", wr}, {"client-over-member-cpu", cw}} {
				if len(d.xs) == 0 {
					continue
				}
				m, h := meanCI95(d.xs)
				b.ReportMetric(m, d.name+"-ns/call")
				b.ReportMetric(h, d.name+"-ci95-ns")
			}
		})
	}
}

// meanCI95 returns the mean of xs and the half width of its 95% confidence
// interval (normal approximation: the pairs number in the hundreds).
func meanCI95(xs []float64) (mean, half float64) {
	if len(xs) < 2 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, 1.96 * math.Sqrt(ss/float64(len(xs)-1)/float64(len(xs)))
}

// wireBudgetMs is the budget the "meta" mode's requests carry: a minute
// less a few milliseconds, the size of what the client sends in the other
// modes (a number the decoder boxes, as theirs).
const wireBudgetMs int64 = 59_990

// toolCaller connects a client to a server with the echo tool on sdkName's
// in-process transport, set up for mode (see BenchmarkToolCall), and
// returns one tools/call; the connections close with b.
func toolCaller(b *testing.B, sdkName, mode string, obs *otelbudget.Observer) func(context.Context) error {
	b.Helper()
	ctx := context.Background()
	if sdkName == "mcp-go" {
		var sopts []mgserver.ServerOption
		switch mode {
		case "budget":
			s, err := deadlinemcpgo.NewServer()
			require.NoError(b, err)
			sopts = s.Options()
		case "spans":
			_, opts, err := otelbudgetmcpgo.ServerOptions(obs, nil)
			require.NoError(b, err)
			sopts = opts
		}
		s := mgserver.NewMCPServer("bench", "v1", append(sopts, mgserver.WithToolCapabilities(true))...)
		s.AddTools(mcpgoEcho())
		var tr mgtransport.Interface = mgtransport.NewInProcessTransport(s)
		var fixed *fixedParams
		switch mode {
		case "raw", "wire":
			fixed = &fixedParams{Interface: tr, member: mode == "wire"}
			tr = fixed
		case "client", "budget":
			c, err := deadlinemcpgo.NewClient()
			require.NoError(b, err)
			tr = c.Transport(tr)
		case "spans":
			var err error
			tr, err = otelbudgetmcpgo.ClientTransport(obs, tr, nil)
			require.NoError(b, err)
		}
		mc := mgclient.NewClient(tr)
		require.NoError(b, mc.Start(ctx))
		b.Cleanup(func() { _ = mc.Close() })
		_, err := mc.Initialize(ctx, mgmcp.InitializeRequest{Params: mgmcp.InitializeParams{ClientInfo: mgmcp.Implementation{Name: "bench", Version: "v1"}}})
		require.NoError(b, err)
		req := mgmcp.CallToolRequest{Params: mgmcp.CallToolParams{Name: "echo"}}
		if mode == "meta" {
			req.Params.Meta = &mgmcp.Meta{AdditionalFields: map[string]any{mcpbudget.MetaKey: wireBudgetMs}}
		}
		call := func(ctx context.Context) error {
			_, err := mc.CallTool(ctx, req)
			return err
		}
		if fixed != nil {
			require.NoError(b, call(ctx)) // the params are written once, by the SDK
			require.NotNil(b, fixed.params)
		}
		return call
	}
	s := sdk.NewServer(impl, nil)
	c := sdk.NewClient(impl, nil)
	switch mode {
	case "budget":
		srv, err := deadlinemcp.NewServer()
		require.NoError(b, err)
		s.AddReceivingMiddleware(srv.Middleware())
		fallthrough
	case "client":
		cl, err := deadlinemcp.NewClient()
		require.NoError(b, err)
		c.AddSendingMiddleware(cl.Middleware())
	case "spans":
		smw, err := otelbudgetmcp.ServerMiddleware(obs, nil)
		require.NoError(b, err)
		s.AddReceivingMiddleware(smw...)
		cmw, err := otelbudgetmcp.ClientMiddleware(obs, nil)
		require.NoError(b, err)
		c.AddSendingMiddleware(cmw...)
	}
	sdkEcho(s)
	st, ct := sdk.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	require.NoError(b, err)
	cs, err := c.Connect(ctx, ct, nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	params := &sdk.CallToolParams{Name: "echo"}
	if mode == "meta" {
		params.Meta = sdk.Meta{mcpbudget.MetaKey: wireBudgetMs}
	}
	return func(ctx context.Context) error {
		_, err := cs.CallTool(ctx, params)
		return err
	}
}

// fixedParams is an mcp-go client transport that sends every tools/call
// with the params the SDK wrote for the first one, marshalled once; with
// member, the budget's _meta member (mcpbudget.MetaKey, wireBudgetMs) is
// in them. The least a wrapper can do per call: "wire" less "raw" is
// what the member costs mcp-go, "client" less "wire" what the adapter
// does per call beyond writing it.
type fixedParams struct {
	mgtransport.Interface
	member bool
	params json.RawMessage
}

func (f *fixedParams) SendRequest(ctx context.Context, req mgtransport.JSONRPCRequest) (*mgtransport.JSONRPCResponse, error) {
	if req.Method == "tools/call" {
		if f.params == nil {
			b, err := json.Marshal(req.Params)
			if err != nil {
				return nil, err
			}
			const open = `{"_meta":{`
			if !bytes.HasPrefix(b, []byte(open)) {
				return nil, fmt.Errorf("params %s do not open with %s", b, open)
			}
			if f.member {
				b = append([]byte(open+strconv.Quote(mcpbudget.MetaKey)+":"+strconv.FormatInt(wireBudgetMs, 10)+","), b[len(open):]...)
			}
			f.params = b
		}
		req.Params = f.params
	}
	return f.Interface.SendRequest(ctx, req)
}
