package otelbudgetmcp

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// rpcCode is the JSON-RPC code of the first JSON-RPC error in err's chain.
func rpcCode(err error) (int64, bool) {
	we, ok := errors.AsType[*jsonrpc.Error](err)
	if !ok {
		return 0, false
	}
	return we.Code, true
}
