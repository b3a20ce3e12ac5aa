// Package admission is a server's admission of the budgets its callers
// send: one rule, shared by every transport that receives a budget (HTTP's
// middleware, gRPC's interceptors, MCP's server middleware, the
// propagator's Extract and Consume, queue consumers).
//
// [Admit] is the rule: the effective budget is the smallest of the inbound
// budget ([Inbound]), the server's maximum and an outer deadline the call
// already runs under; at 0 the call is refused as spent, at or below the
// floor as unable to finish ([Refusal]). The result is a [Decision], with
// the [deadline.Deadline] the handler runs under.
//
// An [Admitter] is that rule configured once for a server ([Config]), plus
// what the server learns from its own traffic ([Learned]: refuse on
// arrival a call whose budget is below what its route very likely needs)
// and a bounded queue ([NewQueue]: adaptive LIFO; a waiting call leaves as
// soon as it can no longer finish). An admitted call holds a [Ticket] until its
// handler returns or panics.
//
// The client side, the budget a call spends across its attempts, is
// package deadline; this package imports it and the standard library only.
package admission
