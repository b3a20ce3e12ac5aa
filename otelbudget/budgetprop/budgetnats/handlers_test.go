package budgetnats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop/budgetnats"
)

// The tests that need no broker. Those that run an embedded NATS server
// are in the natstest module, so that the server stays out of this
// module's go.mod.

func newProp(t *testing.T, now func() time.Time) *budgetprop.Propagator {
	t.Helper()
	p, err := budgetprop.New(budgetprop.WithClock(now))
	require.NoError(t, err)
	return p
}

func TestHandlersRejectNil(t *testing.T) {
	p := newProp(t, time.Now)
	_, err := budgetnats.Handler(context.Background(), p, func(context.Context, *nats.Msg) {}, nil)
	require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	_, err = budgetnats.JetStreamHandler(context.Background(), nil, func(context.Context, jetstream.Msg) {}, func(jetstream.Msg, error) {})
	require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	var nilCtx context.Context
	_, err = budgetnats.Handler(nilCtx, p, func(context.Context, *nats.Msg) {}, func(*nats.Msg, *budgetprop.RefusedError) {})
	require.True(t, errors.Is(err, deadline.ErrInvalidPolicy))
}
