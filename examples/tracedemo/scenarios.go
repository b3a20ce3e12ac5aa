package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// The article's settings, shared by every step of the plan.
const (
	floor       = 20 * time.Millisecond
	backoffBase = 50 * time.Millisecond
	backoffMax  = 400 * time.Millisecond

	// defaultBudget is the run's budget unless a scenario or -budget says
	// otherwise: the article's one second.
	defaultBudget = time.Second
	// defaultSeed seeds the backoff jitter, as the article's random.Random(7).
	defaultSeed = 7

	// workSearch, workFetch and workExtract are how long each provider
	// works on a request that it answers normally. The article's operations
	// take 10ms; extraction is made slower here so that a tight budget cuts
	// its lease visibly (its 250ms ceiling still fits it with room to spare).
	workSearch  = 10 * time.Millisecond
	workFetch   = 10 * time.Millisecond
	workExtract = 150 * time.Millisecond
)

// step is one logical call of the agent plan: one HTTP request, retried by
// the budget transport under its own ceiling and attempt limit.
type step struct {
	name     string
	method   string
	path     string
	body     string // sent with an Idempotency-Key, so that it may be retried
	ceiling  time.Duration
	attempts int
}

// agentPlan returns the source article's agent run: search, fetch, extract.
func agentPlan() []step {
	return []step{
		{name: "search", method: http.MethodGet, path: "/search?q=deadline+budget", ceiling: 250 * time.Millisecond, attempts: 2},
		{name: "fetch", method: http.MethodGet, path: "/pages/1", ceiling: 100 * time.Millisecond, attempts: 3},
		{name: "extract", method: http.MethodPost, path: "/extract", body: `{"page":1,"fields":["title","date"]}`, ceiling: 250 * time.Millisecond, attempts: 2},
	}
}

// reply is how a provider answers one request.
type reply struct {
	// hang: wait, without answering, until the request's lease (the budget
	// it arrived with) or its connection ends.
	hang bool
	// work is how long the provider takes before it answers.
	work time.Duration
	// status is the response status; 0 means 200 with a JSON body.
	status int
	// retryAfter is the Retry-After value sent with the status, if any.
	retryAfter string
}

// script is the sequence of replies a provider gives, one per request it
// receives; the last one repeats.
type script []reply

// at returns the reply to request n (1 for the first).
func (s script) at(n int) reply {
	if len(s) == 0 {
		return reply{}
	}
	return s[min(n, len(s))-1]
}

// expect is what a step must end with for the scenario to have behaved as
// designed.
type expect struct {
	verdict  otelbudget.Verdict
	reason   deadline.Reason
	attempts int // attempts started
	requests int // requests the provider received
}

// scenario is one way the run can go, reproducible with a seed: how each
// provider behaves, the budget, and what must come out.
type scenario struct {
	name   string
	about  string
	budget time.Duration
	// scripts maps a step name to its provider's replies; a step with no
	// script answers normally after its usual work time.
	scripts map[string]script
	// want lists, in plan order, the steps that must run and how each must
	// end; the steps after the last one must not run at all.
	want []stepWant
}

type stepWant struct {
	step string
	expect
}

// normal returns how the provider behind step answers when the scenario
// says nothing else.
func normal(step string) reply {
	switch step {
	case "search":
		return reply{work: workSearch}
	case "fetch":
		return reply{work: workFetch}
	case "extract":
		return reply{work: workExtract}
	}
	return reply{}
}

// script returns the replies of the provider behind step.
func (sc scenario) script(step string) script {
	if s, ok := sc.scripts[step]; ok {
		return s
	}
	return script{normal(step)}
}

// scenarios returns every scenario, in the order the help text lists them.
// It builds them on each call: there is no package-level mutable state.
func scenarios() []scenario {
	ok := func(step string, attempts int) stepWant {
		return stepWant{step, expect{verdict: otelbudget.VerdictOK, reason: deadline.ReasonSuccess, attempts: attempts, requests: attempts}}
	}
	return []scenario{
		{
			name:   "ok",
			about:  "the article's run: fetch's first request hangs until its lease ends, the retry succeeds",
			budget: defaultBudget,
			scripts: map[string]script{
				"fetch": {{hang: true}, normal("fetch")},
			},
			want: []stepWant{ok("search", 1), ok("fetch", 2), ok("extract", 1)},
		},
		{
			// 280ms: search (10ms) and fetch (100ms hang, a backoff of at
			// most 50ms, 10ms) leave extract at most 280-20-120 = 140ms of
			// lease, less than its 150ms of work and its 250ms ceiling: the
			// deadline, not the provider, ends it.
			name:   "tight",
			about:  "the budget is too small: extract's lease is cut by the deadline, which then ends it",
			budget: 280 * time.Millisecond,
			scripts: map[string]script{
				"fetch": {{hang: true}, normal("fetch")},
			},
			want: []stepWant{
				ok("search", 1), ok("fetch", 2),
				{"extract", expect{verdict: otelbudget.VerdictDeadlineTooSmall, reason: deadline.ReasonDeadline, attempts: 1, requests: 1}},
			},
		},
		{
			name:   "slow",
			about:  "the fetch provider takes 150ms, longer than its 100ms ceiling, on every request",
			budget: defaultBudget,
			scripts: map[string]script{
				"fetch": {{work: 150 * time.Millisecond}},
			},
			want: []stepWant{
				ok("search", 1),
				{"fetch", expect{verdict: otelbudget.VerdictTooSlow, reason: deadline.ReasonExhausted, attempts: 3, requests: 3}},
			},
		},
		{
			// Retry-After counts whole seconds (RFC 9110 delay-seconds), so
			// this scenario needs a budget of a few seconds: 3s leaves room
			// for the first Retry-After (1s) but not for the second (5s).
			// fetch is the step throttled because it may make 3 attempts:
			// the second Retry-After is only weighed if a retry remains.
			name:   "ratelimited",
			about:  "fetch answers 429 with Retry-After: 1 (it fits), then Retry-After: 5 (it does not)",
			budget: 3 * time.Second,
			scripts: map[string]script{
				"fetch": {
					{work: workFetch, status: http.StatusTooManyRequests, retryAfter: "1"},
					{work: workFetch, status: http.StatusTooManyRequests, retryAfter: "5"},
				},
			},
			want: []stepWant{
				ok("search", 1),
				{"fetch", expect{verdict: otelbudget.VerdictThrottled, reason: deadline.ReasonRetryAfterTooLong, attempts: 2, requests: 2}},
			},
		},
		{
			name:   "flaky",
			about:  "fetch answers 503 twice, extract once, then both succeed: the POST is retried because it carries an Idempotency-Key",
			budget: defaultBudget,
			scripts: map[string]script{
				"fetch":   {{work: 5 * time.Millisecond, status: http.StatusServiceUnavailable}, {work: 5 * time.Millisecond, status: http.StatusServiceUnavailable}, normal("fetch")},
				"extract": {{work: 5 * time.Millisecond, status: http.StatusServiceUnavailable}, normal("extract")},
			},
			want: []stepWant{ok("search", 1), ok("fetch", 3), ok("extract", 2)},
		},
		{
			name:   "refused",
			about:  "a 10ms budget is below the 20ms floor: search is refused before dialing, no provider sees a request",
			budget: 10 * time.Millisecond,
			want: []stepWant{
				{"search", expect{verdict: otelbudget.VerdictDeadlineTooSmall, reason: deadline.ReasonRefused, attempts: 0, requests: 0}},
			},
		},
	}
}

// scenarioNames returns the names of every scenario, for help and errors.
func scenarioNames() []string {
	var names []string
	for _, sc := range scenarios() {
		names = append(names, sc.name)
	}
	return names
}

// findScenario returns the scenario called name.
func findScenario(name string) (scenario, error) {
	all := scenarios()
	i := slices.IndexFunc(all, func(sc scenario) bool { return sc.name == name })
	if i < 0 {
		return scenario{}, fmt.Errorf("unknown scenario %q: want one of %s", name, strings.Join(scenarioNames(), ", "))
	}
	return all[i], nil
}
