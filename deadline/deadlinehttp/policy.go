package deadlinehttp

import (
	"context"
	"net/http"

	"github.com/deadlinebudget/budget/deadline"
)

type policyKey struct{}

// WithRequestPolicy returns a copy of ctx carrying p: every request a
// [Transport] sends with that context (or one derived from it) runs under
// p rather than the policy the Transport would choose ([WithPolicyFunc],
// [WithPolicy]). Set it next to the deadline, where the step is known:
//
//	ctx = deadline.NewContext(ctx, d)
//	ctx = deadlinehttp.WithRequestPolicy(ctx, fetchPolicy)
//	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
//
// p is used as [WithPolicy] describes (the default name "HTTP <method>",
// the classifier bounded by what is safe to repeat), its hooks observe
// these calls, and the Transport's [WithHooks] hooks still apply. An
// invalid p makes each such RoundTrip return its [*deadline.PolicyError]
// without sending anything. The context carries a copy: changing p
// afterwards changes nothing.
func WithRequestPolicy(ctx context.Context, p deadline.Policy) context.Context {
	return context.WithValue(ctx, policyKey{}, &p)
}

// RequestPolicy returns the policy [WithRequestPolicy] stored in ctx, and
// whether there is one: the policy a [Transport] runs a request with that
// context under, before it composes its own [WithHooks] hooks and retry
// budget with it. It returns a copy: changing it changes nothing in ctx.
func RequestPolicy(ctx context.Context) (deadline.Policy, bool) {
	if p, ok := ctx.Value(policyKey{}).(*deadline.Policy); ok {
		return *p, true
	}
	return deadline.Policy{}, false
}

// policyFor returns the policy req runs under, by precedence: the one its
// context carries, then the policy function's, then WithPolicy's (or the
// default). The Transport's hooks are composed after the policy's own, and
// its retry budget fills in for a policy that has none.
func (t *Transport) policyFor(req *http.Request) deadline.Policy {
	if p, ok := RequestPolicy(req.Context()); ok {
		return t.cfg.withClientHooks(p)
	}
	if f := t.cfg.policyFunc; f != nil {
		if p, ok := f(req); ok {
			return t.cfg.withClientHooks(p)
		}
	}
	return t.cfg.policy
}

func (c *config) withClientHooks(p deadline.Policy) deadline.Policy {
	p.Hooks = deadline.Compose(p.Hooks, c.clientHooks)
	if p.RetryBudget == nil {
		p.RetryBudget = c.retryBudget
	}
	if p.Limiter == nil {
		p.Limiter = c.limiter
	}
	return p
}
