package deadlinegrpc

import "time"

// Admission is what a [Server] decided for one RPC, as reported to
// [WithAdmission]: the inbound deadline, the limits the server applied, the
// budget that resulted, and whether the RPC was refused. It is a plain
// value; durations are measured on arrival.
type Admission struct {
	// HasDeadline reports that the RPC arrived with a deadline (grpc-timeout).
	HasDeadline bool
	// Inbound is the time its deadline had left on arrival: negative if it
	// had already passed, saturated for a grpc-timeout too large for a
	// time.Duration, 0 when HasDeadline is false.
	Inbound time.Duration
	// MaxBudget is the server's maximum ([WithMaxBudget]).
	MaxBudget time.Duration
	// Budget is the effective budget: the smaller of Inbound (when
	// present) and MaxBudget, never below 0.
	Budget time.Duration
	// Limit says which of the two set Budget.
	Limit Limit
	// Floor is the server's floor ([WithFloor]).
	Floor time.Duration
	// Refusal says whether the RPC was refused, and why.
	Refusal Refusal
}

// Clamped reports whether the inbound deadline was further away than the
// server's maximum, which replaced it.
func (a Admission) Clamped() bool { return a.HasDeadline && a.Limit == LimitMax }

// Refused reports whether the RPC was refused and the handler not called.
func (a Admission) Refused() bool { return a.Refusal != RefusalNone }

// Limit says which limit set an RPC's effective budget. On a tie the
// inbound deadline wins.
type Limit uint8

const (
	// LimitInbound: the inbound deadline, at or below the maximum.
	LimitInbound Limit = iota + 1
	// LimitMax: the server's maximum, because the inbound deadline was
	// further away, or absent.
	LimitMax
)

// String returns "header" (the inbound deadline arrives as the
// grpc-timeout header; the HTTP middleware names its own header's limit the
// same, so one telemetry vocabulary serves both) or "max".
func (l Limit) String() string {
	switch l {
	case LimitInbound:
		return "header"
	case LimitMax:
		return "max"
	}
	return "unknown"
}

// Refusal says why a [Server] refused an RPC, if it did.
type Refusal uint8

const (
	// RefusalNone: the RPC was admitted and the handler ran.
	RefusalNone Refusal = iota
	// RefusalSpent: nothing was left on arrival. Refused whatever the floor.
	RefusalSpent
	// RefusalFloor: the budget was above zero but at or below the floor.
	RefusalFloor
)

// String returns "none", "spent" or "floor".
func (r Refusal) String() string {
	switch r {
	case RefusalNone:
		return "none"
	case RefusalSpent:
		return "spent"
	case RefusalFloor:
		return "floor"
	}
	return "unknown"
}
