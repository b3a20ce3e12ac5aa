package otelbudgetmcp

import (
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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
