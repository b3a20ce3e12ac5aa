// Package grpcbench measures the cost of the budget-aware gRPC interceptors
// (deadlinegrpc) on a unary RPC over bufconn and loopback TCP, with an empty
// message and with 1 KiB in / 4 KiB out, against no interceptor (with and
// without a context deadline) and against failsafe-go's failsafegrpc with a
// retry policy (with and without a context deadline), and with
// deadlinegrpc's server interceptors installed too. BenchmarkOverhead is the
// robust comparison (interleaved blocks on the process CPU clock);
// BenchmarkUnary gives ns/op and allocs/op; BenchmarkTrailerCapture tells
// how much of deadlinegrpc's own cost is grpc-go's work for its trailer
// capture.
//
//	go test -run '^$' -bench BenchmarkOverhead -benchtime=120x -count=6 ./grpcbench/
//	go test -run '^$' -bench BenchmarkTrailerCapture -benchtime=1000x -count=6 ./grpcbench/
//	go test -run '^$' -bench BenchmarkUnary -benchtime=3000x -count=3 -benchmem ./grpcbench/
package grpcbench
