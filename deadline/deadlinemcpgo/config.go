package deadlinemcpgo

import (
	"context"
	"time"

	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// ServerOption configures [NewServer].
type ServerOption interface{ applyServer(*serverConfig) }

type serverOptionFunc func(*serverConfig)

func (f serverOptionFunc) applyServer(c *serverConfig) { f(c) }

type serverConfig struct {
	mcpbudget.ServerBase // WithMaxBudget, WithFloor, WithInboundMetaKey
	queue                *overload.Limiter
	limiter              *overload.Limiter
	admission            []func(ctx context.Context, method, name string, a mcpbudget.Admission)
}

// WithMaxBudget sets [admission.Limits].MaxBudget, the most a request is
// granted and what one without a budget gets (default 30 s; > 0, above
// the floor).
func WithMaxBudget(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.Limits.MaxBudget = d })
}

// WithFloor sets [admission.Limits].Floor: a request whose budget is at or
// below it is refused with [mcpbudget.CodeBudgetRefused] and its handler
// not called (default 0; >= 0, below the maximum).
func WithFloor(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.Limits.Floor = d })
}

// WithInboundMetaKey sets the _meta key the server reads the budget from
// (default [mcpbudget.MetaKey]); it must match the clients'. A key that
// breaks MCP's rules ([mcpbudget.ValidKey]) makes NewServer return a
// [*deadline.PolicyError].
func WithInboundMetaKey(key string) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.SetKey("deadlinemcpgo.WithInboundMetaKey", key) })
}

// WithQueue bounds how many admitted handlers run at once with q
// ([admission.NewQueue]): a request waits for a slot only while what is left
// of its budget covers the floor, and is refused when the queue is full
// ([admission.RefusalQueueFull]) or it can no longer finish
// ([admission.RefusalQueueTimeout]). Several servers may share one queue.
// Set WithQueue or WithLimiter, not both. A nil q adds nothing.
func WithQueue(q *overload.Limiter) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.queue = q })
}

// WithLimiter bounds the admitted handlers with an adaptive limit
// ([overload.Limiter]; [admission.Config].Limiter), its limit following
// the handlers' latency, by route ([mcpbudget.Route]: "tools/call
// search"). A nil l adds nothing.
func WithLimiter(l *overload.Limiter) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.limiter = l })
}

// WithAdmission adds a function called once per request a handler
// middleware of the server sees (tools/call, prompts/get, resources/read),
// on its goroutine, with what the server decided before the handler runs
// or the refusal is returned. method is the MCP method, name the tool's or
// prompt's name or the resource's URI. Use it for telemetry. Calls add
// functions, called in order; a nil f adds nothing.
func WithAdmission(f func(ctx context.Context, method, name string, a mcpbudget.Admission)) ServerOption {
	return serverOptionFunc(func(c *serverConfig) {
		if f != nil {
			c.admission = append(c.admission, f)
		}
	})
}
