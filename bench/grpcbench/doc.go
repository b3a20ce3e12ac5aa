// Package grpcbench measures the cost of the budget-aware gRPC interceptors
// (deadlinegrpc) on a unary RPC over bufconn and loopback TCP, with an empty
// message and with 1 KiB in / 4 KiB out, against no interceptor (with and
// without a context deadline) and against failsafe-go's failsafegrpc with a
// retry policy (with and without a context deadline), and with
// deadlinegrpc's server interceptors installed too. BenchmarkOverhead is the
// robust comparison (interleaved blocks on the process CPU clock);
// BenchmarkUnary gives ns/op and allocs/op; BenchmarkOverheadSteps builds
// deadlinegrpc's own cost up one step at a time (the lease's context,
// deadline.Do, the trailer capture, the rest of the interceptor), beside an
// A/A control that says what the measure resolves.
//
//	go test -run '^$' -bench '^BenchmarkOverhead$' -benchtime=120x -count=6 ./grpcbench/
//	go test -run '^$' -bench '^BenchmarkOverheadSteps$' -benchtime=400x -count=10 ./grpcbench/
//	go test -run '^$' -bench BenchmarkUnary -benchtime=3000x -count=3 -benchmem ./grpcbench/
package grpcbench
