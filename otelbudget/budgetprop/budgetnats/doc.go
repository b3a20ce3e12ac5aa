// Package budgetnats carries the remaining budget through NATS message
// headers with package budgetprop: a propagation.TextMapCarrier over
// nats.Header ([HeaderCarrier]), a message that carries it ([NewMsg], sent with
// nats.Conn.PublishMsg or jetstream.JetStream.PublishMsg), and
// consumers for core NATS ([Handler]) and JetStream ([JetStreamHandler])
// that run the application's handler under what is left and report an
// expired message instead of processing it. With JetStream an expired
// message is terminated (Term), so the server never redelivers it.
//
// It is a module of its own (it needs github.com/nats-io/nats.go). The tests
// that run an embedded NATS server on 127.0.0.1 are in the natstest module
// beside it, so that the server is not in this module's go.mod, nor in the
// module graph of a program that imports budgetnats.
package budgetnats
