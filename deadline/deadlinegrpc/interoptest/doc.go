// Package interoptest runs grpc-go's interop client cases
// (google.golang.org/grpc/interop, the cases every gRPC implementation
// passes) against package deadlinegrpc's interceptors, and the stream test
// that serves interop.NewTestServer. Its runner, RunInterop, with Logger
// and TestServiceMethods, is shared with otelbudgetgrpc's interop test
// (otelbudget/otelbudgetgrpc/test), which imports this module: neither is
// published, so the runner is written once.
//
// It is a module of its own because package interop imports the xDS ORCA
// protos (github.com/cncf/xds): in deadlinegrpc's own tests they made
// `go mod tidy` in every program importing deadlinegrpc record their
// checksums, and those of their dependencies, in its go.sum. (The module
// graph of such a program still lists the xDS modules: grpc-go's go.mod
// requires them.)
package interoptest
