// Package grpcbench measures the cost of the budget-aware gRPC client
// interceptor (deadlinegrpc) on a unary RPC over bufconn, against no
// interceptor and against failsafe-go's failsafegrpc with a retry policy.
//
//	go test -run '^$' -bench . -benchmem ./grpcbench/
package grpcbench
