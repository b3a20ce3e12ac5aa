package otelbudgeteino

import (
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// Config says how a [Budget] leases an agent's calls out of its run's
// deadline and how it names them. The zero Config is valid: the deadline
// package's default policy for model and tool calls, no reserve, the global
// OpenTelemetry providers.
type Config struct {
	// Agent is the agent's name (gen_ai.agent.name, and the run span's
	// name "invoke_agent {Agent}"). [Budget.Run] uses the ADK agent's own
	// name when this is empty.
	Agent string

	// Provider is the GenAI provider (gen_ai.provider.name), e.g.
	// genai.ProviderOpenAI. Empty: the attribute is not set.
	Provider string

	// ModelName is the model requested (gen_ai.request.model), and names
	// the model step and span: "chat {ModelName}" ("chat" when empty).
	ModelName string

	// Model is the policy of every model call: attempts, per-attempt
	// ceiling, floor, backoff. Its Name is replaced by the step's name
	// ("chat {ModelName}"). Zero (MaxAttempts 0): deadline.DefaultPolicy().
	Model deadline.Policy

	// Tool is the policy of a tool call that Tools does not name. Its Name
	// is replaced by "execute_tool {tool}". Zero: deadline.DefaultPolicy().
	// A tool is retried only when its ToolPolicy says ReadOnly; this one
	// is not.
	Tool deadline.Policy

	// Tools gives a tool, by name, a policy of its own and says whether it
	// may be retried.
	Tools map[string]ToolPolicy

	// Reserve is the time kept back for a final model call so that the
	// agent can answer (see the package doc). Tools and ordinary model
	// calls are leased as if the deadline came Reserve earlier: their
	// floor is raised by Reserve. 0: no reserve, and a run the budget
	// cannot finish ends with the typed stop. Must be >= 0.
	Reserve time.Duration

	// ModelNeed is how long a model call is known to take, for the
	// reserve rule before the run has seen one: a normal model call starts
	// only when the longer of ModelNeed and the longest model call of the
	// run so far fits in what is left above the floor and the reserve;
	// otherwise the final call is made now. 0: learned only. Must be >= 0.
	ModelNeed time.Duration

	// AbandonGrace is how long a tool call whose lease has ended is given
	// to return before it is abandoned (its goroutine left running, its
	// result discarded, the abandonment reported). 0: 1ms. Must be >= 0.
	AbandonGrace time.Duration

	// Observer records the spans and metrics. Nil: otelbudget.New(), the
	// global providers.
	Observer *otelbudget.Observer
}

// ToolPolicy is one tool's policy.
type ToolPolicy struct {
	// Policy leases the tool's calls; its Name is replaced by
	// "execute_tool {tool}". Zero (MaxAttempts 0): Config.Tool.
	Policy deadline.Policy
	// ReadOnly marks the tool as safe to repeat (idempotent, read-only):
	// only then is a failed call retried, when the policy allows more
	// attempts and its Retryable (default deadline.IsRetryable) says so.
	ReadOnly bool
}

const defaultAbandonGrace = time.Millisecond

func (c Config) validate() error {
	check := func(field string, p deadline.Policy) error {
		if p.MaxAttempts == 0 {
			return nil
		}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("otelbudgeteino: %s: %w", field, err)
		}
		return nil
	}
	if err := check("Config.Model", c.Model); err != nil {
		return err
	}
	if err := check("Config.Tool", c.Tool); err != nil {
		return err
	}
	for name, tp := range c.Tools {
		if err := check(fmt.Sprintf("Config.Tools[%q].Policy", name), tp.Policy); err != nil {
			return err
		}
	}
	if c.Reserve < 0 {
		return &deadline.PolicyError{Field: "Config.Reserve", Value: c.Reserve, Allowed: ">= 0"}
	}
	if c.ModelNeed < 0 {
		return &deadline.PolicyError{Field: "Config.ModelNeed", Value: c.ModelNeed, Allowed: ">= 0"}
	}
	if c.AbandonGrace < 0 {
		return &deadline.PolicyError{Field: "Config.AbandonGrace", Value: c.AbandonGrace, Allowed: ">= 0"}
	}
	return nil
}

func orDefault(p deadline.Policy) deadline.Policy {
	if p.MaxAttempts == 0 {
		return deadline.DefaultPolicy()
	}
	return p
}
