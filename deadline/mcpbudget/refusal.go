package mcpbudget

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/deadlinebudget/budget/deadline/admission"
)

// CodeBudgetRefused is the JSON-RPC error code a server answers a request
// with when its admission refused it before the handler ran: the effective
// budget was spent or at or below the server's floor (or, with a learned
// rule or a queue, too small for what the route needs, or the queue was
// full). It is in the range JSON-RPC leaves to implementations (-32000 to
// -32099), and the code the MCP TypeScript SDK uses for a request that
// timed out. [RefusalError] gives the message and data; a client never
// retries it: the next attempt would arrive with even less.
const CodeBudgetRefused = -32001

// RefusalError returns the JSON-RPC error a server answers a refused
// request with: code [CodeBudgetRefused]; the message says the budget and
// the floor in whole milliseconds, rounded up ("deadline budget too small:
// budget-ms=5, floor-ms=20", as deadlinehttp's Deadline-Refused header
// and deadlinegrpc's trailer); data holds the same two numbers,
// {"budget_ms": 5, "floor_ms": 20}, and for a refusal other than spent or
// floor also its name ({"refusal": "queue_full"}, …: [admission.Refusal]).
func RefusalError(a admission.Decision) (code int64, message string, data json.RawMessage) {
	budget, floor := roundUpMs(a.Budget), roundUpMs(a.Floor)
	message = "deadline budget too small: budget-ms=" + strconv.FormatInt(budget, 10) + ", floor-ms=" + strconv.FormatInt(floor, 10)
	var name string
	switch a.Refusal {
	case admission.RefusalSpent, admission.RefusalFloor:
	case admission.RefusalQueueFull:
		message = "deadline: server overloaded, admission queue full: budget-ms=" + strconv.FormatInt(budget, 10)
		name = a.Refusal.String()
	default:
		name = a.Refusal.String()
		message += ", refusal=" + name
	}
	data, _ = json.Marshal(refusalData{Budget: budget, Floor: floor, Refusal: name})
	return CodeBudgetRefused, message, data
}

type refusalData struct {
	Budget  int64  `json:"budget_ms"`
	Floor   int64  `json:"floor_ms"`
	Refusal string `json:"refusal,omitempty"`
}

// RefusedError is a server's refusal of a request's budget as the caller
// sees it, whichever SDK it is written with: the JSON-RPC error
// [CodeBudgetRefused] that a server of either SDK adapter answers
// ([RefusalError]), or another server that follows the same shape. The
// clients of both adapters return it inside their [*deadline.StopError], so
// that errors.As(err, &refused) works the same on both; Err is the SDK's
// own error (the go-sdk's *jsonrpc.Error, mcp-go's error), which errors.As
// reaches too. A client never retries it.
type RefusedError struct {
	// Budget and Floor are the budget the server found and its floor, from
	// the error's data (whole milliseconds); zero when the data held none.
	Budget, Floor time.Duration
	// Refusal is the data's refusal name ("learned", "queue_timeout",
	// "queue_full"), "" for a budget spent or at or below the floor.
	Refusal string
	// Message is the server's message.
	Message string
	// Err is the SDK's error, as its client returned it.
	Err error
}

// Error returns the server's message.
func (e *RefusedError) Error() string {
	if e.Message == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the SDK's error.
func (e *RefusedError) Unwrap() error { return e.Err }

// ErrorType returns the error.type otelbudget's observer gives the CLIENT
// span of the refused attempt, the same value the server's SERVER span
// gives the refusal (otelbudget.ServerRefusalErrorType) and an HTTP
// server's for the same condition: "queue_full" when the server's
// admission queue was full (Refusal "queue_full": overload, whatever the
// budget), else "deadline_refused".
func (e *RefusedError) ErrorType() string {
	if e.Refusal == refusalQueueFull {
		return "queue_full"
	}
	return "deadline_refused"
}

// refusalQueueFull is the data's refusal name of a full admission queue.
var refusalQueueFull = admission.RefusalQueueFull.String()

// NewRefusedError returns the [*RefusedError] of a JSON-RPC error whose
// code is [CodeBudgetRefused], reading budget, floor and refusal from
// data: JSON bytes (a json.RawMessage or []byte), or a value decoded from
// JSON (a map), whichever the SDK hands its caller. It returns false for
// any other code. Data it cannot read leaves the durations zero.
func NewRefusedError(code int64, message string, data any, err error) (*RefusedError, bool) {
	if code != CodeBudgetRefused {
		return nil, false
	}
	var raw []byte
	switch d := data.(type) {
	case nil:
	case json.RawMessage:
		raw = d
	case []byte:
		raw = d
	default:
		raw, _ = json.Marshal(d)
	}
	var rd refusalData
	if len(raw) > 0 && json.Unmarshal(raw, &rd) != nil {
		rd = refusalData{}
	}
	r := &RefusedError{Refusal: rd.Refusal, Message: message, Err: err}
	if rd.Budget >= 0 && rd.Budget <= maxBudgetMs {
		r.Budget = time.Duration(rd.Budget) * time.Millisecond
	}
	if rd.Floor >= 0 && rd.Floor <= maxBudgetMs {
		r.Floor = time.Duration(rd.Floor) * time.Millisecond
	}
	return r, true
}

// IsRefused reports whether err holds a [*RefusedError].
func IsRefused(err error) bool {
	_, ok := errors.AsType[*RefusedError](err)
	return ok
}
