package deadlinegrpc

import (
	"context"

	"github.com/deadlinebudget/budget/deadline"
)

// Methods of the standard gRPC services whose streams live as long as the
// connection: a [Server] does not end them at its maximum budget, and a
// [Client] does not give them its default budget, when the caller set no
// deadline (see [WithExemptMethods]).
const (
	// HealthWatchMethod is grpc.health.v1.Health/Watch: a health-checking
	// client watches a service's status for as long as it is connected.
	HealthWatchMethod = "/grpc.health.v1.Health/Watch"
	// ORCAStreamMethod is ORCA's out-of-band load reporting stream
	// (xds.service.orca.v3.OpenRcaService/StreamCoreMetrics).
	ORCAStreamMethod = "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics"
	// ReflectionMethod is server reflection, v1
	// (grpc.reflection.v1.ServerReflection/ServerReflectionInfo).
	ReflectionMethod = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	// ReflectionV1AlphaMethod is server reflection, v1alpha.
	ReflectionV1AlphaMethod = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
)

// defaultExempt are the methods exempt by default: the long-lived
// streams of the standard services.
var defaultExempt = [...]string{HealthWatchMethod, ORCAStreamMethod, ReflectionMethod, ReflectionV1AlphaMethod}

// exemptSet is a set of full method names, made once by an option list.
type exemptSet map[string]bool

func newExemptSet() exemptSet {
	s := make(exemptSet, len(defaultExempt))
	for _, m := range defaultExempt {
		s[m] = true
	}
	return s
}

// applies reports whether method is exempt for an RPC whose context is
// ctx: it is in the set and the caller set no deadline, neither a context
// deadline nor a [deadline.Deadline].
func (s exemptSet) applies(ctx context.Context, method string) bool {
	return s[method] && unbounded(ctx)
}

// unbounded reports whether ctx carries no deadline at all.
func unbounded(ctx context.Context) bool {
	_, bounded := deadline.FromContext(ctx)
	return !bounded
}

// ExemptOption is an option of both [NewClient] and [NewServer]:
// [WithExemptMethods].
type ExemptOption interface {
	ClientOption
	ServerOption
}

type exemptOption []string

func (o exemptOption) applyClient(c *clientConfig) {
	if bad, ok := o.invalid(); ok {
		c.fail("deadlinegrpc.WithExemptMethods", bad, `a full method name "/package.Service/Method"`)
		return
	}
	for _, m := range o {
		c.exempt[m] = true
	}
}

func (o exemptOption) applyServer(c *serverConfig) {
	if bad, ok := o.invalid(); ok {
		c.fail("deadlinegrpc.WithExemptMethods", bad, `a full method name "/package.Service/Method"`)
		return
	}
	for _, m := range o {
		c.exempt[m] = true
	}
}

func (o exemptOption) invalid() (string, bool) {
	for _, m := range o {
		if !validMethod(m) {
			return m, true
		}
	}
	return "", false
}

// WithExemptMethods declares long-lived methods, by full method name
// ("/pkg.Service/Method"), in addition to the standard ones exempt by
// default ([HealthWatchMethod], [ORCAStreamMethod], [ReflectionMethod],
// [ReflectionV1AlphaMethod]): subscriptions, watches, streams that last as
// long as the connection. It is an option of both [NewServer] and
// [NewClient]; calls add to the list. A name not of that form makes them
// return a [*deadline.PolicyError].
//
// An RPC of an exempt method that arrives (on a Server) or is made (on a
// Client) without a deadline, neither a context deadline nor a
// [deadline.Deadline], runs without a budget: the Server neither ends it at
// its maximum ([WithMaxBudget]) nor refuses it, and calls no [WithAdmission]
// function (the handler's context carries no Deadline, so the calls it
// makes get their clients' default budgets); the Client sends it once, as
// grpc-go would without the interceptors, without grpc-timeout. An exempt
// method called with a deadline is admitted and retried as any other: a
// caller that sets a deadline on a long-lived stream gets it, clamped to
// the server's maximum.
//
// Proxies have the same rule to keep: Envoy's max_grpc_timeout (and a
// route's timeout) ends a stream that has no grpc-timeout at the route's
// limit unless it is set to 0 for such routes.
func WithExemptMethods(methods ...string) ExemptOption {
	return exemptOption(methods)
}
