package agenttest

import (
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// The shape scenarios' agent: its name, its model, its policies. Both
// frameworks' TestShape configure their agent with these, so that their
// dumps compare.
const (
	ShapeAgent = "researcher"
	ShapeModel = "fake-1"
)

// ShapeModelPolicy is the model calls' policy of the shape scenarios.
func ShapeModelPolicy() deadline.Policy {
	return deadline.Policy{MaxAttempts: 3, AttemptTimeout: 400 * time.Millisecond, Floor: 20 * time.Millisecond}
}

// ShapeToolPolicy is the tool calls' policy of the shape scenarios.
func ShapeToolPolicy() deadline.Policy {
	return deadline.Policy{MaxAttempts: 1, AttemptTimeout: 2 * time.Second, Floor: 20 * time.Millisecond}
}

// ShapeScenario is one run both frameworks make for [Shape]: the
// provider asks for Turns tool calls (its first request answered 429 with
// retry-after-ms 50: a model call of two attempts), each tool call takes
// 30 ms but call SlowAt (0: none), which ignores its context for 5 s and is
// abandoned; the run has Budget and keeps Reserve.
type ShapeScenario struct {
	Name            string
	Turns, SlowAt   int
	Budget, Reserve time.Duration
}

// ShapeScenarios are the scenarios of testdata/shape.golden.
var ShapeScenarios = []ShapeScenario{
	{Name: "two tool turns, a 429 retried", Turns: 2, Budget: 10 * time.Second},
	{Name: "a tool abandoned, the reserve answers", Turns: 3, SlowAt: 2, Budget: time.Second, Reserve: 200 * time.Millisecond},
}
