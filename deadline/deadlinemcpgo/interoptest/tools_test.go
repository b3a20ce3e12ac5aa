package interoptest

import (
	"context"
	"sync"
	"time"

	mgmcp "github.com/mark3labs/mcp-go/mcp"
	mgserver "github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// tool is one tool served by either SDK: it records what each call
// carried, and hangs its first `hang` calls until their context ends.
type tool struct {
	name     string
	readOnly bool
	hang     int

	mu    sync.Mutex
	calls []arrival
}

type arrival struct {
	meta  any           // the _meta budget as the SDK decoded it
	left  time.Duration // the handler's deadline less now; -1 without one
	ended chan error
}

// handle is the handler's body, whichever SDK runs it.
func (tl *tool) handle(ctx context.Context, meta any) error {
	a := arrival{meta: meta, left: -1, ended: make(chan error, 1)}
	if end, ok := ctx.Deadline(); ok {
		a.left = time.Until(end)
	}
	tl.mu.Lock()
	tl.calls = append(tl.calls, a)
	n := len(tl.calls)
	tl.mu.Unlock()
	context.AfterFunc(ctx, func() { a.ended <- context.Cause(ctx) })
	if n <= tl.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (tl *tool) arrivals() []arrival {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]arrival(nil), tl.calls...)
}

// addSDK adds the tool to a go-sdk server.
func (tl *tool) addSDK(s *sdk.Server) {
	var ann *sdk.ToolAnnotations
	if tl.readOnly {
		ann = &sdk.ToolAnnotations{ReadOnlyHint: true}
	}
	s.AddTool(&sdk.Tool{Name: tl.name, Annotations: ann, InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if err := tl.handle(ctx, req.Params.GetMeta()[mcpbudget.MetaKey]); err != nil {
				return nil, err
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
		})
}

// mcpgoTool returns the tool for an mcp-go server.
func (tl *tool) mcpgoTool() mgserver.ServerTool {
	t := mgmcp.NewTool(tl.name)
	t.Annotations.ReadOnlyHint = mgmcp.ToBoolPtr(tl.readOnly)
	return mgserver.ServerTool{Tool: t, Handler: func(ctx context.Context, req mgmcp.CallToolRequest) (*mgmcp.CallToolResult, error) {
		var meta any
		if req.Params.Meta != nil {
			meta = req.Params.Meta.AdditionalFields[mcpbudget.MetaKey]
		}
		if err := tl.handle(ctx, meta); err != nil {
			return nil, err
		}
		return mgmcp.NewToolResultText("ok"), nil
	}}
}
