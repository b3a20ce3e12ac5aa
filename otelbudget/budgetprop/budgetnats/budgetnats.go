package budgetnats

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
)

// HeaderCarrier adapts a message's nats.Header to a
// propagation.TextMapCarrier (and propagation.ValuesGetter, so that a
// duplicated field is read whole). NATS header keys are case-sensitive:
// the budget fields are written and read in lower case, as
// [budgetprop.FieldBudget] and [budgetprop.FieldExpiry] spell them.
type HeaderCarrier nats.Header

var (
	_ propagation.TextMapCarrier = HeaderCarrier{}
	_ propagation.ValuesGetter   = HeaderCarrier{}
)

// Get returns the first value of key, or "".
func (c HeaderCarrier) Get(key string) string { return nats.Header(c).Get(key) }

// Values returns every value of key.
func (c HeaderCarrier) Values(key string) []string { return nats.Header(c).Values(key) }

// Set replaces the values of key with value.
func (c HeaderCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

// Keys returns the header's keys.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// NewMsg returns a message for subject with data whose headers carry what
// prop injects from ctx: with the composite global propagator, the trace
// context and, through a [budgetprop.Propagator] in it, the remaining
// budget of ctx's deadline. Publish it with nats.Conn.PublishMsg or
// jetstream.JetStream.PublishMsg. A nil prop injects nothing.
func NewMsg(ctx context.Context, prop propagation.TextMapPropagator, subject string, data []byte) *nats.Msg {
	msg := nats.NewMsg(subject)
	msg.Data = data
	if prop != nil {
		prop.Inject(ctx, HeaderCarrier(msg.Header))
	}
	return msg
}

// Handler returns a core NATS message handler that runs handle for each
// message under what is left of its budget ([budgetprop.Propagator.Consume]
// with the message's headers): the queue time is charged, and handle's
// context carries the Extraction and the Deadline and ends at it. A
// message whose budget is spent, or at or below p's floor, is not handled:
// expired is called with it and the *budgetprop.RefusedError, to count,
// log or dead-letter it (core NATS has no acknowledgement: nothing is
// redelivered). ctx is the parent of every handle's context: cancel it to
// end the work in progress.
//
// A nil ctx, p, handle or expired is a *deadline.PolicyError: an expired
// message must reach the application, never vanish.
func Handler(ctx context.Context, p *budgetprop.Propagator, handle func(context.Context, *nats.Msg), expired func(*nats.Msg, *budgetprop.RefusedError)) (nats.MsgHandler, error) {
	if err := check(ctx, p, handle == nil, expired == nil); err != nil {
		return nil, err
	}
	return func(msg *nats.Msg) {
		err := p.Consume(ctx, HeaderCarrier(msg.Header), func(ctx context.Context) error {
			handle(ctx, msg)
			return nil
		})
		if re, ok := errors.AsType[*budgetprop.RefusedError](err); ok {
			expired(msg, re)
		}
	}, nil
}

// JetStreamHandler returns a JetStream message handler (for
// jetstream.Consumer.Consume) that runs handle for each message under what
// is left of its budget, as [Handler] does. handle acknowledges the
// messages it processes as it sees fit (Ack, Nak, InProgress).
//
// A message whose budget is spent, or at or below p's floor, is not
// handled: it is terminated (msg.TermWithReason), so that the server never
// redelivers it, and expired is called with it and an error that matches
// budgetprop.ErrRefused (a *budgetprop.RefusedError, joined with the Term
// error if the termination failed).
//
// A nil ctx, p, handle or expired is a *deadline.PolicyError.
func JetStreamHandler(ctx context.Context, p *budgetprop.Propagator, handle func(context.Context, jetstream.Msg), expired func(jetstream.Msg, error)) (jetstream.MessageHandler, error) {
	if err := check(ctx, p, handle == nil, expired == nil); err != nil {
		return nil, err
	}
	return func(msg jetstream.Msg) {
		err := p.Consume(ctx, HeaderCarrier(msg.Headers()), func(ctx context.Context) error {
			handle(ctx, msg)
			return nil
		})
		if errors.Is(err, budgetprop.ErrRefused) {
			if terr := msg.TermWithReason(TermReason); terr != nil {
				err = errors.Join(err, terr)
			}
			expired(msg, err)
		}
	}, nil
}

// TermReason is the reason [JetStreamHandler] gives the server when it
// terminates an expired message (the server reports it in its
// termination advisory).
const TermReason = "deadline budget spent"

func check(ctx context.Context, p *budgetprop.Propagator, noHandle, noExpired bool) error {
	switch {
	case ctx == nil:
		return &deadline.PolicyError{Field: "budgetnats ctx", Value: "nil", Allowed: "a non-nil context.Context"}
	case p == nil:
		return &deadline.PolicyError{Field: "budgetnats propagator", Value: "nil", Allowed: "a *budgetprop.Propagator from budgetprop.New"}
	case noHandle:
		return &deadline.PolicyError{Field: "budgetnats handle", Value: "nil", Allowed: "a non-nil handler"}
	case noExpired:
		return &deadline.PolicyError{Field: "budgetnats expired", Value: "nil", Allowed: "a non-nil callback: an expired message must reach the application"}
	}
	return nil
}
