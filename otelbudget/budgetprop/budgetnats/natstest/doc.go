// Package natstest holds the tests of package budgetnats that run an
// embedded NATS server (github.com/nats-io/nats-server) on 127.0.0.1: core
// NATS and JetStream round trips through a real broker.
//
// It is a module of its own, as otelbudget/test is for the SDK, so that the
// NATS server and its dependencies never enter budgetnats's go.mod: a
// program that imports budgetnats does not find them in its module graph
// or its go.sum.
package natstest
