package otelbudgeteino

import (
	"context"
	"time"
)

type outcome[T any] struct {
	v   T
	err error
}

// abandonable runs fn on a goroutine of its own and returns what it returns,
// or, once ctx has ended and fn has not returned within grace, returns
// ctx's cause with abandoned true, leaving fn running: its result is then
// discarded. A call that honours its context returns within grace and is
// not abandoned.
func abandonable[T any](ctx context.Context, grace time.Duration, fn func(context.Context) (T, error)) (v T, abandoned bool, err error) {
	done := make(chan outcome[T], 1) // buffered: an abandoned fn never blocks
	go func() {
		v, err := fn(ctx)
		done <- outcome[T]{v, err}
	}()
	select {
	case o := <-done:
		return o.v, false, o.err
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case o := <-done:
		return o.v, false, o.err
	case <-t.C:
		var zero T
		return zero, true, context.Cause(ctx)
	}
}
