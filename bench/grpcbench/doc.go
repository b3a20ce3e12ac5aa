// Package grpcbench measures the cost of the budget-aware gRPC client
// interceptor (deadlinegrpc) on a unary RPC over bufconn and loopback TCP,
// against no interceptor and against failsafe-go's failsafegrpc with a
// retry policy. BenchmarkOverhead is the robust comparison (interleaved
// blocks on the process CPU clock); BenchmarkUnary gives ns/op and
// allocs/op.
//
//	go test -run '^$' -bench BenchmarkOverhead -benchtime=100x -count=5 ./grpcbench/
//	go test -run '^$' -bench BenchmarkUnary -benchtime=3000x -count=5 -benchmem ./grpcbench/
package grpcbench
