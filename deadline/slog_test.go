package deadline_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// textLogger logs to buf at level without the time, so lines are exact.
func textLogger(buf *bytes.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func TestLogHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		p := policy(2, 250*time.Millisecond, 20*time.Millisecond)
		p.Name = "fetch"
		p.Backoff = deadline.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, Jitter: deadline.JitterNone}
		p.Hooks = deadline.LogHooks(textLogger(&buf, slog.LevelDebug))
		v, err := deadline.Do(context.Background(), deadline.New(time.Second), p,
			script(new(attemptLog), after(5*time.Millisecond, deadline.Retryable(errFlaky)), after(30*time.Millisecond, nil)))
		require.NoError(t, err)
		assert.Equal(t, 2, v)
		assert.Equal(t, strings.Join([]string{
			`level=INFO msg="deadline attempt" step=fetch attempt=1 granted=250ms limited_by=ceiling remaining=1s duration=5ms ended_by=error retryable=true error=flaky`,
			`level=DEBUG msg="deadline backoff" step=fetch attempt=1 delay=10ms source=policy remaining=995ms fits=true`,
			`level=DEBUG msg="deadline attempt" step=fetch attempt=2 granted=250ms limited_by=ceiling remaining=985ms duration=30ms ended_by=completed`,
			`level=INFO msg="deadline call" step=fetch reason=success verdict=ok attempts=2 duration=45ms remaining=955ms`,
		}, "\n")+"\n", buf.String())
	})
}

func TestLogHooksFailureAtInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		p := policy(1, 0, 20*time.Millisecond)
		p.Name = "search"
		p.Hooks = deadline.LogHooks(textLogger(&buf, slog.LevelInfo))
		_, err := deadline.Do(context.Background(), deadline.New(100*time.Millisecond), p, hang)
		require.Error(t, err)
		assert.Equal(t, strings.Join([]string{
			`level=INFO msg="deadline attempt" step=search attempt=1 granted=80ms limited_by=deadline remaining=100ms duration=80ms ended_by=deadline retryable=false error="context deadline exceeded"`,
			`level=WARN msg="deadline call" step=search reason=deadline_exceeded verdict=deadline_too_small attempts=1 duration=80ms remaining=20ms error="search: the shared deadline was reached (after 1 attempt): context deadline exceeded"`,
		}, "\n")+"\n", buf.String())

		buf.Reset()
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, ok)
		require.NoError(t, err)
		assert.Equal(t, `level=INFO msg="deadline call" step=search reason=success verdict=ok attempts=1 duration=0s remaining=1s`+"\n", buf.String(),
			"a successful attempt logs at Debug only")
	})
}

func TestLogHooksRefusedAndNilLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		p := policy(1, 0, 20*time.Millisecond)
		p.Hooks = deadline.LogHooks(textLogger(&buf, slog.LevelDebug))
		_, err := deadline.Do(context.Background(), deadline.New(10*time.Millisecond), p, ok)
		require.Error(t, err)
		assert.Equal(t, `level=WARN msg="deadline call" step=step reason=refused verdict=deadline_too_small attempts=0 duration=0s remaining=10ms error="step: refused before attempt 1: 10ms left, floor 20ms"`+"\n", buf.String())
		assert.NotNil(t, deadline.LogHooks(nil), "nil logs to slog.Default()")
	})
}

// The call line carries the verdict: here a slow attempt that reached its
// ceiling, then attempts exhausted.
func TestLogHooksVerdict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		p := policy(1, 100*time.Millisecond, 20*time.Millisecond)
		p.Name = "fetch"
		p.Hooks = deadline.LogHooks(textLogger(&buf, slog.LevelWarn))
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, hang)
		require.Error(t, err)
		assert.Equal(t, `level=WARN msg="deadline call" step=fetch reason=attempts_exhausted verdict=operation_too_slow attempts=1 duration=100ms remaining=900ms error="fetch: attempts exhausted (after 1 attempt): attempt 1 exceeded its 100ms ceiling: context deadline exceeded"`+"\n", buf.String())
	})
}
