package agentrun

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"

	"github.com/deadlinebudget/budget/deadline"
)

// handled collects what otel.Handle reports while a test runs.
type handled struct {
	mu   sync.Mutex
	errs []error
}

func (h *handled) Handle(err error) {
	h.mu.Lock()
	h.errs = append(h.errs, err)
	h.mu.Unlock()
}

// A tool that returns within the grace after its lease is not abandoned;
// one that ignores its context is, its result discarded, and WaitTools
// waits for it.
func TestCallToolAbandons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRun(deadline.New(time.Second), Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		v, abandoned, err := CallTool(ctx, r, ToolCall{Name: "lookup"}, func(ctx context.Context) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		})
		assert.False(t, abandoned)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Empty(t, v)

		start := time.Now()
		v, abandoned, err = CallTool(ctx, r, ToolCall{Name: "lookup", CallID: "c2", Lease: 100 * time.Millisecond}, func(context.Context) (string, error) {
			time.Sleep(time.Second)
			return "late", nil
		})
		assert.True(t, abandoned)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Empty(t, v)
		assert.Equal(t, DefaultGrace, time.Since(start), "returned after the grace, not the tool")
		assert.Equal(t, []Abandoned{{Tool: "lookup", CallID: "c2", Lease: 100 * time.Millisecond}}, r.Abandoned())
		res := NewResult(r, "", false, nil)
		res.WaitTools()
		assert.Equal(t, time.Second, time.Since(start), "WaitTools waited for the abandoned tool")
		assert.Equal(t, 2, res.ToolCalls)
	})
}

// A panic before abandonment comes back as a *PanicError; one after is
// recovered, recorded and reported through otel.Handle, never raised again.
func TestCallToolPanics(t *testing.T) {
	h := &handled{}
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(h)
	defer otel.SetErrorHandler(prev)
	synctest.Test(t, func(t *testing.T) {
		r := NewRun(deadline.New(time.Second), Config{})
		_, abandoned, err := CallTool(context.Background(), r, ToolCall{Name: "boom"}, func(context.Context) (int, error) {
			panic("immediate")
		})
		assert.False(t, abandoned)
		pe, ok := errors.AsType[*PanicError](err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, "immediate", pe.Value)
		assert.False(t, pe.Late)
		assert.NotEmpty(t, pe.Stack)
		assert.Equal(t, "tool_panic", ErrorType(err))

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, abandoned, _ = CallTool(ctx, r, ToolCall{Name: "boom", CallID: "c1"}, func(context.Context) (int, error) {
			time.Sleep(time.Second)
			panic("late")
		})
		assert.True(t, abandoned)
		res := NewResult(r, 0, false, nil)
		res.WaitTools()
		require.Len(t, res.Abandoned, 1)
		assert.Equal(t, "late", res.Abandoned[0].Panic)
	})
	require.Len(t, h.errs, 1)
	pe, ok := errors.AsType[*PanicError](h.errs[0])
	require.True(t, ok)
	assert.True(t, pe.Late)
	assert.Equal(t, "boom", pe.Tool)
}

// The reserve rule: a normal model call starts only when its need fits
// above floor + reserve; otherwise the call is the final one.
func TestNextModelCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const floor = 20 * time.Millisecond
		r := NewRun(deadline.New(300*time.Millisecond), Config{Reserve: 60 * time.Millisecond})
		assert.False(t, r.NextModelCall(floor), "nothing learned: 300ms left, 80ms kept")
		r.ModelCallDone(10 * time.Millisecond)
		time.Sleep(210 * time.Millisecond) // 90ms left: 10ms above floor + reserve
		assert.True(t, r.NextModelCall(floor), "a 10ms need does not fit in the 10ms left above floor + reserve")
		assert.True(t, r.Final())
		assert.Equal(t, floor, r.ModelFloor(floor, true))
		assert.Equal(t, floor+60*time.Millisecond, r.ModelFloor(floor, false))

		none := NewRun(deadline.New(30*time.Millisecond), Config{ModelNeed: time.Second})
		assert.False(t, none.NextModelCall(floor), "without a reserve every call is a normal one")
		configured := NewRun(deadline.New(time.Second), Config{Reserve: 100 * time.Millisecond, ModelNeed: 900 * time.Millisecond})
		assert.True(t, configured.NextModelCall(floor), "the configured need counts before any call is seen")
	})
}
