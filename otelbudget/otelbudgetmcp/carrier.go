package otelbudgetmcp

import (
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// metaCarrier lets a TextMapPropagator read and write a request's _meta,
// where MCP's semantic conventions carry the trace context (traceparent,
// tracestate: keys without a prefix, as the W3C names them).
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// params returns req's params, nil for none (the SDK hands a request
// without params as a typed nil).
func params(req mcp.Request) mcp.Params {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p
}

// target names what a request acts on for span names: the tool of a
// tools/call, else nothing.
func target(p mcp.Params) string {
	switch p := p.(type) {
	case *mcp.CallToolParams:
		return p.Name
	case *mcp.CallToolParamsRaw:
		return p.Name
	}
	return ""
}
