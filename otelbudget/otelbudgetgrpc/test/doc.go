// Package test holds the tests of package otelbudgetgrpc, and an example of
// the spans it records: they record spans and metrics with the OpenTelemetry
// SDK, and run grpc-go's interop cases (google.golang.org/grpc/interop, which
// imports the xDS ORCA protos of github.com/cncf/xds). The package's own
// runnable example, which needs no SDK, is beside it.
//
// It is a module of its own, as otelbudget/test is for otelbudget, so that
// neither the SDK's packages nor the interop cases' are needed to load the
// tests of otelbudgetgrpc's package: a program that imports otelbudgetgrpc
// gets no checksum of theirs in its go.sum. (Its module graph still lists
// the SDK and the xDS modules: grpc-go's and otelgrpc's own go.mod files
// require them.)
package test
