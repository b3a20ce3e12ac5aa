package otelbudgetmcp

import (
	"errors"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func asType(err error, target *interface{ ErrorType() string }) bool {
	return errors.As(err, target)
}

// rpcCode is the JSON-RPC code of the first JSON-RPC error in err's chain,
// as a string ("-32001").
func rpcCode(err error) (string, bool) {
	we, ok := errors.AsType[*jsonrpc.Error](err)
	if !ok {
		return "", false
	}
	return strconv.FormatInt(we.Code, 10), true
}
