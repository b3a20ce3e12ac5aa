package deadlinemcpgo_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// writingTransport is an mcp-go client transport that does what every one
// of mcp-go's does with a request, marshal it, and answers at once: what a
// wrapper over it costs is all the wrapper's.
type writingTransport struct{ transport.Interface }

var answered = &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, Result: json.RawMessage(`{"content":[]}`)}

func (writingTransport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if _, err := json.Marshal(req); err != nil {
		return nil, err
	}
	return answered, ctx.Err()
}

// toolCallParams are the params of one tools/call as mcp-go's client hands
// them to its transport: raw members for protocol 2026-07-28 (its _meta
// holding the protocol's own members), the typed struct for earlier ones.
func toolCallParams(modern bool) any {
	if !modern {
		return mcp.CallToolParams{Name: "echo"}
	}
	return map[string]json.RawMessage{
		"_meta": json.RawMessage(`{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"v1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`),
		"name":  json.RawMessage(`"echo"`),
	}
}

// leastWrapper returns the least a wrapper that sends the budget can do
// per call: the request's params with the budget's member, written once
// and sent as they are, under a plain context.WithTimeout.
func leastWrapper(t testing.TB, modern bool) func(context.Context, transport.JSONRPCRequest) error {
	b, err := json.Marshal(toolCallParams(modern))
	require.NoError(t, err)
	member := strconv.Quote(mcpbudget.MetaKey) + ":59990"
	var params json.RawMessage
	if modern {
		const open = `{"_meta":{`
		require.True(t, strings.HasPrefix(string(b), open), "%s", b)
		params = json.RawMessage(open + member + "," + string(b[len(open):]))
	} else {
		params = json.RawMessage(`{"_meta":{` + member + "}," + string(b[1:]))
	}
	require.True(t, json.Valid(params), "%s", params)
	var inner writingTransport
	return func(ctx context.Context, req transport.JSONRPCRequest) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		req.Params = params
		_, err := inner.SendRequest(ctx, req)
		return err
	}
}

// plainTimeout returns the request sent as the SDK hands it, without the
// budget, under a plain context.WithTimeout: what any deadline on the
// call costs.
func plainTimeout() func(context.Context, transport.JSONRPCRequest) error {
	var inner writingTransport
	return func(ctx context.Context, req transport.JSONRPCRequest) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := inner.SendRequest(ctx, req)
		return err
	}
}

// budgetWrapper returns a Client's transport over writingTransport.
func budgetWrapper(t testing.TB) func(context.Context, transport.JSONRPCRequest) error {
	c, err := deadlinemcpgo.NewClient()
	require.NoError(t, err)
	tr := c.Transport(writingTransport{})
	return func(ctx context.Context, req transport.JSONRPCRequest) error {
		_, err := tr.SendRequest(ctx, req)
		return err
	}
}

func toolCall(modern bool) transport.JSONRPCRequest {
	return transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(1000)), Method: "tools/call", Params: toolCallParams(modern)}
}

// A tool call through a Client's transport allocates no more than the
// same request sent without the budget under a plain timeout, and, for
// protocol 2026-07-28's raw params, no more than the least wrapper that
// sends the budget (leastWrapper): the attempt's context is what a plain
// timeout allocates, and the params, the budget's member and the tool's
// name are written into what the Client keeps. (Typed params are written
// by the SDK's MarshalJSON, which allocates whoever calls it: the least
// wrapper, whose params are written once, does not pay it.)
func TestTransportAllocatesNoMoreThanAPlainTimeout(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops what it is given at random under the race detector")
	}
	for _, modern := range []bool{true, false} {
		req := toolCall(modern)
		per := func(send func(context.Context, transport.JSONRPCRequest) error) float64 {
			return testing.AllocsPerRun(200, func() {
				if err := send(deadline.NewContext(context.Background(), deadline.New(time.Minute)), req); err != nil {
					t.Fatal(err)
				}
			})
		}
		ours, plain := per(budgetWrapper(t)), per(plainTimeout())
		assert.LessOrEqual(t, ours, plain, "modern %v: the budget's transport allocates %v per call, the request under a plain timeout %v", modern, ours, plain)
		if modern {
			least := per(leastWrapper(t, modern))
			assert.LessOrEqual(t, ours, least, "the budget's transport allocates %v per call, the least wrapper %v", ours, least)
		}
	}
}

// BenchmarkTransport is one tools/call over a transport that marshals the
// request and answers at once, with params as mcp-go gives them for
// protocol 2026-07-28 ("modern") and earlier ("typed"): sent as they are
// under a plain context.WithTimeout ("plain"), through the least wrapper
// that sends the budget ("least"; see leastWrapper), and through a
// Client's transport ("budget"). budget − least is what the adapter spends
// per call beyond sending the member; docs/mcp.md quotes it.
func BenchmarkTransport(b *testing.B) {
	for _, modern := range []bool{true, false} {
		name := map[bool]string{true: "modern", false: "typed"}[modern]
		for _, mode := range []string{"plain", "least", "budget"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				send := budgetWrapper(b)
				switch mode {
				case "plain":
					send = plainTimeout()
				case "least":
					send = leastWrapper(b, modern)
				}
				req := toolCall(modern)
				b.ReportAllocs()
				for b.Loop() {
					if err := send(deadline.NewContext(context.Background(), deadline.New(time.Minute)), req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
